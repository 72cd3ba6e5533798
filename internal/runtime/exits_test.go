package runtime

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	t0      = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
)

func TestExitsOverlayStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		record     func(e *exits)
		state      runtimeapi.ContainerState
		wantState  runtimeapi.ContainerState
		wantCode   int32
		wantReason string
	}{
		{"no event: the CRI's word", func(*exits) {}, running, running, 0, ""},
		{"exit 137 before the CRI knows", func(e *exits) { e.record("c", Exit{Code: 137, At: t0}, t0) }, running, exited, 137, "Error"},
		{"exit 0 is Completed", func(e *exits) { e.record("c", Exit{Code: 0, At: t0}, t0) }, running, exited, 0, "Completed"},
		{"an OOM, then the exit", func(e *exits) {
			e.recordOOM("c", t0)
			e.record("c", Exit{Code: 137, At: t0}, t0)
		}, running, exited, 137, "OOMKilled"},
		{"an OOM alone is no exit", func(e *exits) { e.recordOOM("c", t0) }, running, running, 0, ""},
		{"another container's exit", func(e *exits) { e.record("d", Exit{Code: 1, At: t0}, t0) }, running, running, 0, ""},
		{"the CRI caught up: its status stands", func(e *exits) { e.record("c", Exit{Code: 1, At: t0}, t0) }, exited, exited, 2, "Error"},
	} {
		var e exits
		tc.record(&e)
		st := &runtimeapi.ContainerStatus{Id: "c", State: tc.state}
		if tc.state == exited {
			st.ExitCode, st.Reason = 2, "Error"
		}
		e.overlayStatus(st)
		if st.State != tc.wantState || st.ExitCode != tc.wantCode || st.Reason != tc.wantReason {
			t.Errorf("%s: state %v code %d reason %q, want %v %d %q", tc.name, st.State, st.ExitCode, st.Reason, tc.wantState, tc.wantCode, tc.wantReason)
		}
		if tc.wantState == exited && tc.state == running && st.FinishedAt != t0.UnixNano() {
			t.Errorf("%s: finishedAt %d, want the event's %d", tc.name, st.FinishedAt, t0.UnixNano())
		}
	}
}

// Once the CRI shows the exit the record is gone, so that a later status
// (the container restarted under the same ID is impossible, but a stale
// record must not outlive its use) is the CRI's alone.
func TestExitsForgetWhenCaughtUp(t *testing.T) {
	var e exits
	e.record("c", Exit{Code: 1, At: t0}, t0)
	if _, ok := e.pending("c", exited); ok {
		t.Fatal("pending for a container the CRI shows exited")
	}
	if _, ok := e.pending("c", running); ok {
		t.Error("the record outlived the CRI catching up")
	}
}

func TestExitsExpire(t *testing.T) {
	var e exits
	e.record("sandbox", Exit{Code: 0, At: t0}, t0) // never listed as a container
	e.record("c", Exit{Code: 1, At: t0}, t0.Add(exitTTL+time.Second))
	if _, ok := e.pending("sandbox", running); ok {
		t.Error("an exit older than exitTTL was kept")
	}
	if _, ok := e.pending("c", running); !ok {
		t.Error("a fresh exit was dropped")
	}
}

func TestExitsOverlayList(t *testing.T) {
	list := func() []*runtimeapi.Container {
		return []*runtimeapi.Container{{Id: "a", State: running}, {Id: "b", State: running}, {Id: "c", State: exited}}
	}
	var e exits
	e.record("b", Exit{Code: 137, At: t0}, t0)
	got := e.overlayList(list(), nil)
	if len(got) != 3 || got[0].State != running || got[1].State != exited || got[2].State != exited {
		t.Errorf("no filter: %v", got)
	}
	onlyRunning := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: running}}
	got = e.overlayList([]*runtimeapi.Container{{Id: "a", State: running}, {Id: "b", State: running}}, onlyRunning)
	if len(got) != 1 || got[0].Id != "a" {
		t.Errorf("running only: %v, want a alone", got)
	}
}
