package podworker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/resize"
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
// the pod unchanged, whatever woke it; reads again only what a later relist
// shows changed; and reads the whole pod when the relist is from before the
// last sync's read or too old to trust, or a refresh fails.
func TestSyncTakesKeptStatus(t *testing.T) {
	ctx := context.Background()
	const whole = "PodStatus u1"
	for name, tc := range map[string]struct {
		// before changes the runtime and the relist after the first sync;
		// it returns the reads the next sync must begin with.
		before func(t *testing.T, e *execEnv, r *fakeRelists) []string
		// restarted: the next sync replaces the container, having read
		// its exit.
		restarted bool
	}{
		"unchanged": {before: func(t *testing.T, e *execEnv, r *fakeRelists) []string {
			e.clk.Step(time.Second)
			r.last = e.relist(t)
			return nil
		}},
		"a container exited": {before: func(t *testing.T, e *execEnv, r *fakeRelists) []string {
			id := e.containerID(t, "app")
			e.rt.Exit(id, 1, "Error")
			e.clk.Step(time.Second)
			r.last = e.relist(t)
			return []string{"ReadContainerStatus " + id}
		}, restarted: true},
		"a container exited and was removed after the relist": {before: func(t *testing.T, e *execEnv, r *fakeRelists) []string {
			id := e.containerID(t, "app")
			e.rt.Exit(id, 1, "Error")
			e.clk.Step(time.Second)
			r.last = e.relist(t)
			if err := e.rt.RemoveContainer(ctx, id); err != nil {
				t.Fatal(err)
			}
			return []string{"ReadContainerStatus " + id}
		}},
		"the sandbox stopped": {before: func(t *testing.T, e *execEnv, r *fakeRelists) []string {
			sbs, err := e.rt.ListPodSandboxes(ctx, nil)
			if err != nil || len(sbs) != 1 {
				t.Fatalf("sandboxes %v, %v", sbs, err)
			}
			id := e.containerID(t, "app")
			if err := e.rt.StopPodSandbox(ctx, sbs[0].Id); err != nil {
				t.Fatal(err)
			}
			e.clk.Step(time.Second)
			r.last = e.relist(t)
			return []string{"SandboxStatus " + sbs[0].Id, "ReadContainerStatus " + id}
		}},
		"a refresh that fails reads the pod whole": {before: func(t *testing.T, e *execEnv, r *fakeRelists) []string {
			id := e.containerID(t, "app")
			e.rt.Exit(id, 1, "Error")
			e.clk.Step(time.Second)
			r.last = e.relist(t)
			e.rt.FailOnce("ReadContainerStatus "+id, errors.New("transport is closing"))
			return []string{"ReadContainerStatus " + id, whole}
		}, restarted: true},
		"the relist began before the last read": {before: func(t *testing.T, e *execEnv, r *fakeRelists) []string {
			r.last = e.relist(t)
			r.last.At = r.last.At.Add(-time.Millisecond)
			return []string{whole}
		}},
		"the relist is older than a resync period": {before: func(t *testing.T, e *execEnv, r *fakeRelists) []string {
			e.clk.Step(time.Second)
			r.last = e.relist(t)
			e.clk.Step(time.Minute)
			return []string{whole}
		}},
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
			want := tc.before(t, e, relists)
			e.rt.ClearCalls()
			next := e.sync()
			var reads []string
			for _, c := range e.rt.Calls() {
				m, _, _ := strings.Cut(c, " ")
				if m != "PodStatus" && m != "SandboxStatus" && m != "ReadContainerStatus" {
					break // the sync's steps begin
				}
				reads = append(reads, c)
			}
			if !slices.Equal(reads, want) {
				t.Errorf("the sync began with the reads %q, want %q", reads, want)
			}
			if want == nil && (next != time.Minute || e.containerID(t, "app") != id) {
				t.Errorf("on the kept status the sync did more than wait for the resync: next %s", next)
			}
			got := e.status(t).ContainerStatuses
			if len(got) != 1 || got[0].ContainerID == "" {
				t.Fatalf("published %+v", got)
			}
			if last := got[0].LastTerminationState.Terminated; tc.restarted && (last == nil || last.ExitCode != 1 || got[0].RestartCount != 1) {
				t.Errorf("the replacement's status does not show the exit: %+v", got[0])
			}
		})
	}
}

// A sync that no PLEG event woke takes the kept status without reading the
// runtime, relist or not, while it is less than a resync period old; a
// change after it reaches the worker as an event, and the sync that event
// wakes reads it.
func TestSyncNotWokenByAnEventTakesKeptStatus(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	relists := &fakeRelists{}
	e.w.ws.deps.Relists = relists
	e.sync() // starts the pod; no relist has seen it
	id := e.containerID(t, "app")

	e.clk.Step(30 * time.Second)
	e.rt.Exit(id, 1, "Error") // not yet in a relist
	e.rt.ClearCalls()
	e.syncNoEvent()
	if got := e.rt.Calls(); len(got) != 0 {
		t.Errorf("a sync no event woke made the calls %q, want none", got)
	}

	e.clk.Step(time.Second)
	relists.last = e.relist(t)
	e.rt.ClearCalls()
	e.sync() // the relist's event
	if got := e.rt.CallsOf("ReadContainerStatus", "PodStatus", "CreateContainer"); len(got) < 2 ||
		got[0] != "ReadContainerStatus "+id || !strings.HasPrefix(got[1], "CreateContainer") {
		t.Errorf("the sync the exit's event woke made the calls %q, want the container read, then its replacement made", got)
	}

	// Kept for a resync period or more: read whole, as the resync does.
	e.clk.Step(time.Minute)
	e.rt.ClearCalls()
	e.syncNoEvent()
	if got := e.rt.CallsOf("PodStatus"); len(got) != 1 {
		t.Errorf("a sync on a status kept a resync period read the pod %d times, want once", len(got))
	}
}

// A worker's first sync takes the pod's sandboxes and containers from the
// last relist and reads each one, none for a new pod; with no relist yet,
// or one a resync period old, it reads the pod whole.
func TestFirstSyncStartsFromTheRelist(t *testing.T) {
	for name, tc := range map[string]struct {
		adopted bool          // the pod runs already, started by another worker
		relist  bool          // a relist was taken before the first sync
		age     time.Duration // of that relist
		want    []string      // the reads the first sync begins with
	}{
		"a new pod":                           {relist: true, want: nil},
		"a running pod":                       {adopted: true, relist: true, want: []string{"SandboxStatus", "ReadContainerStatus"}},
		"no relist yet":                       {want: []string{"PodStatus"}},
		"a relist older than a resync period": {relist: true, age: time.Minute, want: []string{"PodStatus"}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newExecEnv(t, execPod("app"))
			relists := &fakeRelists{}
			e.w.ws.deps.Relists = relists
			if tc.adopted {
				e.sync()
				e.w = newWorker(e.w.ws, e.pod.UID, e.pod.Name, e.pod.Namespace)
				e.w.pod = e.pod
			}
			if tc.relist {
				relists.last = e.relist(t)
				e.clk.Step(tc.age)
			}
			e.rt.ClearCalls()
			e.sync()
			var reads []string
			for _, c := range e.rt.Calls() {
				m, _, _ := strings.Cut(c, " ")
				if m != "PodStatus" && m != "SandboxStatus" && m != "ReadContainerStatus" && m != "ListPodSandbox" && m != "ListContainers" {
					break // the sync's steps begin
				}
				reads = append(reads, m)
			}
			if !slices.Equal(reads, tc.want) {
				t.Errorf("the first sync began with the reads %q, want %q", reads, tc.want)
			}
			made := e.rt.CallsOf("RunPodSandbox")
			if wantMade := 1; tc.adopted {
				wantMade = 0
				if len(made) != wantMade {
					t.Errorf("the running pod got the sandboxes %q, want none", made)
				}
			} else if len(made) != wantMade {
				t.Errorf("the new pod got the sandboxes %q, want one", made)
			}
		})
	}
}

// A sync after a first one that made the sandbox and failed to read it back
// has no kept status: it reads the pod whole, for the relist before it does
// not show what that sync made.
func TestSyncAfterAFailedFirstSyncReadsThePod(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	relists := &fakeRelists{}
	e.w.ws.deps.Relists = relists
	relists.last = e.relist(t) // the pod has nothing yet
	e.rt.FailOnce("ReadContainerStatus", errors.New("transport is closing"))
	e.sync()
	if sbs := e.rt.CallsOf("RunPodSandbox"); len(sbs) != 1 || e.w.kept.st != nil {
		t.Fatalf("the first sync made the sandboxes %q and kept %v; want one and none", sbs, e.w.kept.st)
	}
	e.rt.ClearCalls()
	e.sync()
	if got := e.rt.CallsOf("PodStatus", "RunPodSandbox"); !slices.Equal(got, []string{"PodStatus u1"}) {
		t.Errorf("the sync after made the calls %q, want the pod read whole and no second sandbox", got)
	}
}

// The worker's next sync is told whether a PLEG event came since the last
// one took it.
func TestRuntimeChangedReachesTheNextSync(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	e.w.ws.workers = map[types.UID]*worker{e.pod.UID: e.w}
	if e.w.takeRuntimeChange() {
		t.Fatal("a fresh worker has a runtime change")
	}
	e.w.ws.Notify(e.pod.UID)
	if e.w.takeRuntimeChange() {
		t.Error("Notify (a probe result) was taken for a runtime change")
	}
	e.w.ws.RuntimeChanged(e.pod.UID)
	if !e.w.takeRuntimeChange() {
		t.Error("RuntimeChanged did not reach the next sync")
	}
	if e.w.takeRuntimeChange() {
		t.Error("a runtime change was taken twice")
	}
}

// A relist that began while the last sync's steps ran may not show what
// they made: a sync after it reads the pod whole rather than take the
// sandbox and container it lacks for gone and make them again.
func TestSyncDoesNotTakeARelistFromDuringTheSteps(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	relists := &fakeRelists{}
	e.w.ws.deps.Relists = relists
	var once sync.Once
	e.rt.OnCall(func(_ context.Context, call string) error {
		if strings.HasPrefix(call, "RunPodSandbox") {
			once.Do(func() {
				e.clk.Step(time.Millisecond)
				relists.last = e.relist(t) // the pod has nothing yet
			})
		}
		return nil
	})
	e.sync()
	if len(relists.last.Sandboxes) != 0 || !relists.last.At.After(execT0) {
		t.Fatalf("the relist was not taken during the steps: %+v", relists.last)
	}
	e.rt.ClearCalls()
	e.sync()
	if got := e.rt.CallsOf("PodStatus", "RunPodSandbox", "CreateContainer"); !slices.Equal(got, []string{"PodStatus u1"}) {
		t.Errorf("the sync after made the calls %q, want the pod read whole and nothing made", got)
	}
}

// A container is recorded as running with what was allocated when it
// started: a resize admitted before a later sync sees it running is still
// to be done then, not taken as done.
func TestStartedContainerRecordsItsActuatedResources(t *testing.T) {
	pod := execPod("app")
	// Guaranteed: a Burstable pod's OOM score needs the node's memory.
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	e := newExecEnv(t, pod)
	rz, err := resize.Open(t.TempDir(), e.clk)
	if err != nil {
		t.Fatal(err)
	}
	e.w.ws.deps.Resize = rz
	e.sync()
	act := rz.Actuated(pod.UID)["app"]
	if act.ID != e.containerID(t, "app") || !act.Resources.Limits.Cpu().Equal(resource.MustParse("200m")) {
		t.Errorf("actuated %+v, want the new container with 200m", act)
	}
}
