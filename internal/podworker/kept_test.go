package podworker

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/pleg"
)

// fakeRelists serves a relist the test takes of the fake runtime.
type fakeRelists struct{ last pleg.Relist }

func (f *fakeRelists) LastRelist() pleg.Relist { return f.last }

// relist lists the fake runtime now, as the PLEG would.
func (e *execEnv) relist(t *testing.T) pleg.Relist {
	t.Helper()
	ctx := context.Background()
	sbs, err := e.rt.ListPodSandboxes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctrs, err := e.rt.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pleg.Relist{Sandboxes: sbs, Containers: ctrs, At: e.clk.Now()}
}

// A sync takes the status the last sync left when a later relist shows
// the pod unchanged, whatever woke it, and reads the runtime in every other
// case: a change the relist saw, a relist from before the last sync's read
// or too old to trust.
func TestSyncTakesKeptStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		// before changes the runtime and the relist after the first sync.
		before func(t *testing.T, e *execEnv, r *fakeRelists)
		reads  bool
	}{
		"unchanged": {before: func(t *testing.T, e *execEnv, r *fakeRelists) {
			e.clk.Step(time.Second)
			r.last = e.relist(t)
		}},
		"a container exited": {before: func(t *testing.T, e *execEnv, r *fakeRelists) {
			e.rt.Exit(e.containerID(t, "app"), 1, "Error")
			e.clk.Step(time.Second)
			r.last = e.relist(t)
		}, reads: true},
		"the sandbox is not ready": {before: func(t *testing.T, e *execEnv, r *fakeRelists) {
			sbs, err := e.rt.ListPodSandboxes(context.Background(), nil)
			if err != nil || len(sbs) != 1 {
				t.Fatalf("sandboxes %v, %v", sbs, err)
			}
			if err := e.rt.StopPodSandbox(context.Background(), sbs[0].Id); err != nil {
				t.Fatal(err)
			}
			e.clk.Step(time.Second)
			r.last = e.relist(t)
		}, reads: true},
		"the relist began before the last read": {before: func(t *testing.T, e *execEnv, r *fakeRelists) {
			r.last = e.relist(t)
			r.last.At = r.last.At.Add(-time.Millisecond)
		}, reads: true},
		"the relist is older than a resync period": {before: func(t *testing.T, e *execEnv, r *fakeRelists) {
			e.clk.Step(time.Second)
			r.last = e.relist(t)
			e.clk.Step(time.Minute)
		}, reads: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newExecEnv(t, execPod("app"))
			relists := &fakeRelists{}
			e.w.ws.deps.Relists = relists
			e.sync() // starts the pod: nothing is kept yet
			if n := len(e.rt.CallsOf("PodStatus")); n != 1 {
				t.Fatalf("the first sync read the pod %d times, want once", n)
			}
			id := e.containerID(t, "app")
			tc.before(t, e, relists)
			before := len(e.rt.CallsOf("PodStatus"))
			next := e.sync()
			if read := len(e.rt.CallsOf("PodStatus")) > before; read != tc.reads {
				t.Errorf("the sync read the runtime: %v, want %v", read, tc.reads)
			}
			if !tc.reads && (next != time.Minute || e.containerID(t, "app") != id) {
				t.Errorf("on the kept status the sync did more than wait for the resync: next %s", next)
			}
			if got := e.status(t).ContainerStatuses; len(got) != 1 || got[0].ContainerID == "" {
				t.Errorf("published %+v", got)
			}
		})
	}
}
