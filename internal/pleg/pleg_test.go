package pleg

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
)

func sandbox(id, uid string, ready bool) *runtimeapi.PodSandbox {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandbox{Id: id, State: st, Labels: map[string]string{
		container.LabelPodUID: uid, container.LabelPodName: "p-" + uid, container.LabelPodNamespace: "default",
		container.LabelManagedBy: "true",
	}}
}

func ctr(id, sandboxID string, st runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, PodSandboxId: sandboxID, State: st}
}

func uids(evs []Event) []string {
	var out []string
	for _, e := range evs {
		s := string(e.UID)
		if e.Gone {
			s += " gone"
		}
		out = append(out, s)
	}
	return out
}

func TestDiff(t *testing.T) {
	running, exited := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	base := Group(
		[]*runtimeapi.PodSandbox{sandbox("s1", "a", true), sandbox("s2", "b", true)},
		[]*runtimeapi.Container{ctr("c1", "s1", running), ctr("c2", "s2", running)},
	)
	tests := []struct {
		name string
		sbs  []*runtimeapi.PodSandbox
		cs   []*runtimeapi.Container
		want []string
	}{
		{"nothing changed", []*runtimeapi.PodSandbox{sandbox("s1", "a", true), sandbox("s2", "b", true)},
			[]*runtimeapi.Container{ctr("c1", "s1", running), ctr("c2", "s2", running)}, nil},
		{"a container exited", []*runtimeapi.PodSandbox{sandbox("s1", "a", true), sandbox("s2", "b", true)},
			[]*runtimeapi.Container{ctr("c1", "s1", exited), ctr("c2", "s2", running)}, []string{"a"}},
		{"a container was added", []*runtimeapi.PodSandbox{sandbox("s1", "a", true), sandbox("s2", "b", true)},
			[]*runtimeapi.Container{ctr("c1", "s1", running), ctr("c2", "s2", running), ctr("c3", "s2", running)}, []string{"b"}},
		{"a sandbox died", []*runtimeapi.PodSandbox{sandbox("s1", "a", false), sandbox("s2", "b", true)},
			[]*runtimeapi.Container{ctr("c1", "s1", running), ctr("c2", "s2", running)}, []string{"a"}},
		{"a pod is gone and a new one appeared", []*runtimeapi.PodSandbox{sandbox("s1", "a", true), sandbox("s3", "c", true)},
			[]*runtimeapi.Container{ctr("c1", "s1", running)}, []string{"b gone", "c"}},
		{"containers of foreign sandboxes are ignored", []*runtimeapi.PodSandbox{sandbox("s1", "a", true), sandbox("s2", "b", true)},
			[]*runtimeapi.Container{ctr("c1", "s1", running), ctr("c2", "s2", running), ctr("x", "foreign", exited)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := uids(Diff(base, Group(tt.sbs, tt.cs)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
		})
	}
}

// fakeLister serves a fixed relist and counts calls.
type fakeLister struct {
	mu    sync.Mutex
	sbs   []*runtimeapi.PodSandbox
	cs    []*runtimeapi.Container
	calls int
	err   error
}

func (f *fakeLister) ListPodSandboxes(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.sbs, f.err
}

func (f *fakeLister) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cs, f.err
}

func (f *fakeLister) set(cs ...*runtimeapi.Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cs = cs
}

func recv(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return Event{}
	}
}

// A trigger relists at once, without waiting for the period: that is how a
// containerd task event reaches the pod worker in milliseconds.
func TestTriggerRelistsAtOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	l := &fakeLister{sbs: []*runtimeapi.PodSandbox{sandbox("s1", "a", true)},
		cs: []*runtimeapi.Container{ctr("c1", "s1", runtimeapi.ContainerState_CONTAINER_RUNNING)}}
	p := New(l, time.Hour, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan Event)
	done := make(chan struct{})
	go func() { p.Run(ctx, events); close(done) }()
	defer func() { cancel(); <-done }()

	if ev := recv(t, events); ev.UID != types.UID("a") || ev.Name != "p-a" || ev.Gone {
		t.Fatalf("first relist: %+v", ev)
	}
	l.set(ctr("c1", "s1", runtimeapi.ContainerState_CONTAINER_EXITED))
	p.Trigger()
	if ev := recv(t, events); ev.UID != types.UID("a") {
		t.Fatalf("after the trigger: %+v", ev)
	}
}

func TestHealthy(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	l := &fakeLister{}
	p := New(l, time.Second, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := p.Healthy(); err != nil {
		t.Fatalf("not started yet: %v", err)
	}
	p.started = clk.Now()
	clk.Step(RelistThreshold)
	if err := p.Healthy(); err != nil {
		t.Fatalf("at the threshold: %v", err)
	}
	clk.Step(time.Second)
	if err := p.Healthy(); err == nil {
		t.Fatal("no relist for longer than the threshold must be unhealthy")
	}
	p.lastRelist = clk.Now()
	if err := p.Healthy(); err != nil {
		t.Fatalf("just relisted: %v", err)
	}
}

// A runtime event may reach berth before the CRI reflects it: after a
// trigger the PLEG relists again on its own, so a change the CRI applies a
// moment later is still seen without waiting for the period.
func TestTriggerFollowUps(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	l := &fakeLister{sbs: []*runtimeapi.PodSandbox{sandbox("s1", "a", true)},
		cs: []*runtimeapi.Container{ctr("c1", "s1", runtimeapi.ContainerState_CONTAINER_RUNNING)}}
	p := New(l, time.Hour, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan Event)
	done := make(chan struct{})
	go func() { p.Run(ctx, events); close(done) }()
	defer func() { cancel(); <-done }()
	recv(t, events) // the first relist

	p.Trigger() // the event arrives; the CRI still says running
	waitCalls := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			l.mu.Lock()
			c := l.calls
			l.mu.Unlock()
			if c >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d relists, want %d", c, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitCalls(2)
	l.set(ctr("c1", "s1", runtimeapi.ContainerState_CONTAINER_EXITED)) // now the CRI knows
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(followUpDelay(0))
	if ev := recv(t, events); ev.UID != types.UID("a") {
		t.Fatalf("the follow-up relist did not report the exit: %+v", ev)
	}
}

// Events in a burst (many pods starting) fold into one relist per
// eventRelistGap instead of one relist each.
// timedPLEG runs a PLEG of one pod on a fake clock, with a period of an
// hour (the ticker never fires), until the test ends.
type timedPLEG struct {
	t   *testing.T
	p   *PLEG
	l   *fakeLister
	clk *clocktesting.FakeClock
}

func runTimedPLEG(t *testing.T) *timedPLEG {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	l := &fakeLister{sbs: []*runtimeapi.PodSandbox{sandbox("s1", "a", true)}}
	p := New(l, time.Hour, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan Event, 10)
	done := make(chan struct{})
	go func() { p.Run(ctx, events); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &timedPLEG{t: t, p: p, l: l, clk: clk}
}

func (tp *timedPLEG) calls() int {
	tp.l.mu.Lock()
	defer tp.l.mu.Unlock()
	return tp.l.calls
}

// waitFor waits until the PLEG has made relists calls and sleeps on
// waiters timers (the period's ticker is one).
func (tp *timedPLEG) waitFor(relists, waiters int) {
	tp.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tp.calls() != relists || tp.clk.Waiters() != waiters {
		if time.Now().After(deadline) {
			tp.t.Fatalf("%d relists and %d timers, want %d and %d", tp.calls(), tp.clk.Waiters(), relists, waiters)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTriggersWithinTheGapFold(t *testing.T) {
	tp := runTimedPLEG(t)
	p, clk, waitFor := tp.p, tp.clk, tp.waitFor
	waitFor(1, 1) // the first relist; the ticker
	p.Trigger()
	waitFor(2, 2) // at once; the ticker and the follow-up
	p.Trigger()
	waitFor(2, 3) // within the gap: waits for it
	p.Trigger()
	clk.Step(eventRelistGap)
	waitFor(3, 2) // one relist for both triggers
	// The third trigger was folded into that relist, not left pending for
	// another one.
	if n := len(p.trigger); n != 0 {
		t.Errorf("%d trigger still pending after the folded relist", n)
	}
}

func TestNextEventGap(t *testing.T) {
	for _, tc := range []struct {
		gap    time.Duration
		waited bool
		want   time.Duration
	}{
		{eventRelistGap, false, eventRelistGap},
		{eventRelistGap, true, 2 * eventRelistGap},
		{4 * eventRelistGap, true, 8 * eventRelistGap},
		{8 * eventRelistGap, true, maxEventRelistGap},
		{maxEventRelistGap, true, maxEventRelistGap},
		// A quiet spell ends the burst, however wide the gap had grown.
		{maxEventRelistGap, false, eventRelistGap},
	} {
		if got := nextEventGap(tc.gap, tc.waited); got != tc.want {
			t.Errorf("nextEventGap(%v, %v) = %v, want %v", tc.gap, tc.waited, got, tc.want)
		}
	}
}

// Events in a burst widen the gap: after burstEvents events at once, a
// further one waits twice the least gap; once the burst is over, an event
// relists at once again.
func TestBurstWidensTheGap(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	l := &fakeLister{sbs: []*runtimeapi.PodSandbox{sandbox("s1", "a", true)}}
	p := New(l, time.Hour, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for range burstEvents {
		p.Trigger() // before Run: all counted, one pending
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx, make(chan Event, 10)); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	tp := &timedPLEG{t: t, p: p, l: l, clk: clk}
	tp.waitFor(2, 2) // the first relist, then the pending event's at once; the ticker and a follow-up
	p.Trigger()
	tp.waitFor(2, 3) // in the burst: waits twice the least gap
	clk.Step(eventRelistGap)
	time.Sleep(20 * time.Millisecond)
	if n := tp.calls(); n != 2 { // the follow-up is due, the event still waits
		t.Fatalf("%d relists %v into a gap of %v", n, eventRelistGap, 2*eventRelistGap)
	}
	clk.Step(eventRelistGap)
	tp.waitFor(3, 2)
	// Two follow-ups, then quiet for longer than the burst window: the
	// next event relists at once.
	clk.Step(maxEventRelistGap)
	tp.waitFor(4, 2)
	clk.Step(maxEventRelistGap)
	tp.waitFor(5, 2)
	clk.Step(burstWindow)
	p.Trigger()
	tp.waitFor(6, 2)
}

func TestRecentEventsBurst(t *testing.T) {
	t0 := time.Unix(100, 0)
	var r recentEvents
	for i := range burstEvents - 1 {
		r.add(t0.Add(time.Duration(i) * time.Millisecond))
	}
	if r.burst(t0.Add(10 * time.Millisecond)) {
		t.Error("fewer than burstEvents events make a burst")
	}
	r.add(t0.Add(10 * time.Millisecond))
	if !r.burst(t0.Add(10 * time.Millisecond)) {
		t.Error("burstEvents events within the window make no burst")
	}
	if r.burst(t0.Add(burstWindow)) {
		t.Error("the burst outlived its window")
	}
	// A restart's four events, every 150 ms: no burst however long.
	var slow recentEvents
	at := t0
	for range 10 {
		for range 4 {
			slow.add(at)
		}
		if slow.burst(at) {
			t.Fatal("restarts one at a time make a burst")
		}
		at = at.Add(150 * time.Millisecond)
	}
}

// Events spaced wider than the gap are no burst, though each comes just
// after a follow-up relist: each waits only what keeps it eventRelistGap
// after that relist, as a container's exit after the last restart's
// follow-ups does in the reaction benchmark.
func TestFollowUpsDoNotWidenTheGap(t *testing.T) {
	tp := runTimedPLEG(t)
	tp.waitFor(1, 1)
	tp.p.Trigger()
	tp.waitFor(2, 2) // at once; the ticker and the follow-up
	relists := 2
	for cycle := range 3 {
		tp.clk.Step(followUpDelay(0)) // the follow-up relists
		relists++
		tp.waitFor(relists, 2)
		tp.clk.Step(eventRelistGap / 2)
		tp.p.Trigger() // 30 ms after the last event, 10 after the follow-up
		tp.waitFor(relists, 3)
		tp.clk.Step(eventRelistGap / 2)
		relists++
		deadline := time.Now().Add(10 * time.Second)
		for tp.calls() != relists {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: the event waited more than %v after the follow-up", cycle, eventRelistGap)
			}
			time.Sleep(time.Millisecond)
		}
		tp.waitFor(relists, 2)
	}
}

// A relist's changes against a status are exactly what the status lacks:
// what to read again and what is gone.
func TestRelistChanges(t *testing.T) {
	const (
		running = runtimeapi.ContainerState_CONTAINER_RUNNING
		exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	)
	relist := Relist{
		Sandboxes:  []*runtimeapi.PodSandbox{sandbox("s2", "a", true), sandbox("s1", "a", false), sandbox("s9", "b", true)},
		Containers: []*runtimeapi.Container{ctr("c1", "s2", running), ctr("c0", "s1", exited), ctr("c9", "s9", exited)},
	}
	shown := func() *container.PodStatus {
		return &container.PodStatus{
			UID:       "a",
			Sandboxes: []container.SandboxStatus{{ID: "s2", Ready: true}, {ID: "s1"}},
			Containers: []container.ContainerStatus{
				{ID: "c1", SandboxID: "s2", State: container.StateRunning},
				{ID: "c0", SandboxID: "s1", State: container.StateExited},
			},
		}
	}
	if ch := relist.Changes(shown()); !ch.None() {
		t.Fatalf("the relist differs from the status it was made from: %+v", ch)
	}
	for name, tc := range map[string]struct {
		change func(*container.PodStatus)
		want   Changes
	}{
		"a container exited since": {
			change: func(st *container.PodStatus) { st.Containers[0].State = container.StateExited },
			want:   Changes{Containers: []ContainerRef{{ID: "c1", SandboxID: "s2"}}},
		},
		"a container the relist lacks": {
			change: func(st *container.PodStatus) {
				st.Containers = append(st.Containers, container.ContainerStatus{ID: "c2", SandboxID: "s2", State: container.StateCreated})
			},
			want: Changes{GoneContainers: []string{"c2"}},
		},
		"a container missed": {
			change: func(st *container.PodStatus) { st.Containers = st.Containers[:1] },
			want:   Changes{Containers: []ContainerRef{{ID: "c0", SandboxID: "s1"}}},
		},
		"a sandbox stopped since": {
			change: func(st *container.PodStatus) { st.Sandboxes[0].Ready = false },
			want:   Changes{Sandboxes: []string{"s2"}},
		},
		"a sandbox missed, with its container": {
			change: func(st *container.PodStatus) {
				st.Sandboxes = st.Sandboxes[:1]
				st.Containers = st.Containers[:1]
			},
			want: Changes{Sandboxes: []string{"s1"}, Containers: []ContainerRef{{ID: "c0", SandboxID: "s1"}}},
		},
		"a sandbox the relist lacks": {
			change: func(st *container.PodStatus) { st.Sandboxes[1].ID = "s3" },
			want:   Changes{Sandboxes: []string{"s1"}, GoneSandboxes: []string{"s3"}},
		},
		"another pod": {
			change: func(st *container.PodStatus) { st.UID = "b" },
			want: Changes{Sandboxes: []string{"s9"}, GoneSandboxes: []string{"s2", "s1"},
				Containers: []ContainerRef{{ID: "c9", SandboxID: "s9"}}, GoneContainers: []string{"c1", "c0"}},
		},
	} {
		st := shown()
		tc.change(st)
		if got := relist.Changes(st); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: changes %+v, want %+v", name, got, tc.want)
		}
	}
	if ch := (Relist{}).Changes(&container.PodStatus{UID: "z"}); !ch.None() {
		t.Errorf("a pod with nothing in the runtime changed in a relist without it: %+v", ch)
	}
}
