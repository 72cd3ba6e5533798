package podworker

import (
	"context"
	"errors"
	"io"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/testing/fakecri"
	"github.com/berth-dev/berth/internal/volume"
)

// The executor's tests: whole syncs of one worker against the shared fake
// CRI, on a fake clock, run in the test's goroutine.

var execT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lockedEvents records events as "Type Reason message"; pods stop their
// containers in parallel, so it takes a lock.
type lockedEvents struct {
	mu     sync.Mutex
	events []string
}

func (r *lockedEvents) Event(_ *v1.Pod, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventType+" "+reason+" "+message)
}

func (r *lockedEvents) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// execVolumes is a volume host in a temporary directory; setupErr fails
// Setup.
type execVolumes struct {
	dir      string
	setupErr error
	tornDown bool
}

func (v *execVolumes) Setup(context.Context, *v1.Pod, volume.SetupOptions) (map[string]string, error) {
	return map[string]string{}, v.setupErr
}
func (v *execVolumes) TearDown(context.Context, types.UID) error { v.tornDown = true; return nil }
func (v *execVolumes) ContainerDir(types.UID, string) string     { return v.dir }
func (v *execVolumes) PrepareSubPath(string, string) error       { return nil }
func (v *execVolumes) WriteHostsFile(types.UID, []byte) (string, error) {
	return v.dir + "/hosts", nil
}

type execEnv struct {
	clk    *testingclock.FakeClock
	rt     *fakecri.Runtime
	vols   *execVolumes
	events *lockedEvents
	w      *worker
	pod    *v1.Pod
}

// execPod is a pod of app containers named names, restarted always.
func execPod(names ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways},
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent})
	}
	return pod
}

func newExecEnv(t *testing.T, pod *v1.Pod) *execEnv {
	t.Helper()
	e := &execEnv{
		clk:    testingclock.NewFakeClock(execT0),
		vols:   &execVolumes{dir: t.TempDir()},
		events: &lockedEvents{},
		pod:    pod,
	}
	e.rt = fakecri.New(e.clk)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ws := NewWorkers(ctx, Deps{
		Runtime: e.rt, Volumes: e.vols, Events: e.events, Status: status.NewManager(),
		Clock: e.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PodLogsDir: t.TempDir(), Resync: time.Minute,
	})
	e.w = newWorker(ws, pod.UID, pod.Name, pod.Namespace)
	e.w.pod = pod
	return e
}

// sync runs one sync as the worker's loop does, cancellable by a kill, as
// woken by a PLEG event.
func (e *execEnv) sync() time.Duration { return e.syncWoken(true) }

// syncNoEvent runs a sync that no PLEG event woke: a probe result, a spec
// change or a timer.
func (e *execEnv) syncNoEvent() time.Duration { return e.syncWoken(false) }

func (e *execEnv) syncWoken(runtimeChanged bool) time.Duration {
	next := e.w.cancellableSync(context.Background(), e.pod, runtimeChanged, e.w.ws.deps.Log)
	e.w.lastSynced = e.pod
	return next
}

// status is the pod's published status.
func (e *execEnv) status(t *testing.T) v1.PodStatus {
	t.Helper()
	st, ok := e.w.ws.deps.Status.Get(e.pod.UID)
	if !ok {
		t.Fatal("no status published")
	}
	return st
}

// containerID is the ID of the newest container named name.
func (e *execEnv) containerID(t *testing.T, name string) string {
	t.Helper()
	st, err := e.rt.PodStatus(context.Background(), e.pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	cs := st.LatestContainer(name)
	if cs == nil {
		t.Fatalf("no container %s", name)
	}
	return cs.ID
}

// mutations are the calls that change the runtime, without IDs of the
// objects the fake named.
func mutations(rt *fakecri.Runtime) []string {
	var out []string
	for _, c := range rt.CallsOf("RunPodSandbox", "PullImage", "CreateContainer", "StartContainer", "StopContainer", "StopPodSandbox", "RemoveContainer", "RemovePodSandbox") {
		m, rest, _ := strings.Cut(c, " ")
		if m == "StartContainer" || m == "StopContainer" || m == "RemoveContainer" || m == "StopPodSandbox" || m == "RemovePodSandbox" {
			rest = "" // the fake's IDs
		}
		out = append(out, strings.TrimSpace(m+" "+rest))
	}
	return out
}

func checkCalls(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// A first sync creates the sandbox, pulls, creates and starts the
// container, reads the pod once, before, then the new sandbox and the new
// container alone, and publishes it running.
func TestExecuteStartsPod(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	if next := e.sync(); next != time.Minute {
		t.Errorf("next sync in %v, want the resync period", next)
	}
	checkCalls(t, "calls", mutations(e.rt), []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app", "StartContainer"})
	if n := len(e.rt.CallsOf("PodStatus")); n != 1 {
		t.Errorf("%d reads of the pod's status, want 1 (before the steps)", n)
	}
	if n := len(e.rt.CallsOf("SandboxStatus")); n != 1 {
		t.Errorf("%d reads of the new sandbox, want 1", n)
	}
	if n := len(e.rt.CallsOf("ReadContainerStatus")); n != 1 {
		t.Errorf("%d reads of the new container, want 1", n)
	}
	st := e.status(t)
	if st.Phase != v1.PodRunning || st.PodIP == "" || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("status %+v, want the pod running with an IP", st)
	}
	for _, want := range []string{"Normal Created Created container app", "Normal Started Started container app"} {
		if !slices.Contains(e.events.list(), want) {
			t.Errorf("events %q lack %q", e.events.list(), want)
		}
	}
	// Nothing left to do: the next sync reads the pod once and changes
	// nothing.
	e.rt.ClearCalls()
	e.sync()
	checkCalls(t, "calls of an idle sync", e.rt.Calls(), []string{"PodStatus u1"})
}

// A failure at any step is recorded as the kubelet records it (a waiting
// reason or the pod's sync error, an event) and stops what depends on it;
// the worker retries soon.
func TestExecuteFailureAtEachStep(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		prepare func(e *execEnv)
		// wantNext is when the failed sync asks to run again.
		wantNext time.Duration
		// wantWaiting is app's waiting reason, wantSyncError the pod's.
		wantWaiting, wantSyncError string
		wantEvent                  string
		wantCalls                  []string
		// wantRunning: the pod is Running (its container ran), not Pending.
		wantRunning bool
	}{
		{
			name: "volumes", prepare: func(e *execEnv) { e.vols.setupErr = boom },
			wantNext: retryAfterError, wantSyncError: reasonVolumeFailed,
			wantEvent: "Warning FailedMount MountVolume.SetUp failed: boom",
		},
		{
			name: "sandbox", prepare: func(e *execEnv) { e.rt.Fail("RunPodSandbox", boom) },
			wantNext: retryAfterError, wantSyncError: reasonSandboxFailed,
			wantEvent: "Warning FailedCreatePodSandBox Failed to create pod sandbox: boom",
			wantCalls: []string{"RunPodSandbox u1"},
		},
		{
			name: "the new sandbox's status", prepare: func(e *execEnv) { e.rt.Fail("SandboxStatus", boom) },
			wantNext: retryAfterError, wantCalls: []string{"RunPodSandbox u1"},
		},
		{
			name: "pull", prepare: func(e *execEnv) { e.rt.Fail("PullImage", boom) },
			wantNext: BackOffInitial, wantWaiting: reasonErrImagePull,
			wantCalls: []string{"RunPodSandbox u1", "PullImage busybox"},
		},
		{
			name: "create", prepare: func(e *execEnv) { e.rt.Fail("CreateContainer", boom) },
			wantNext: retryAfterError, wantWaiting: reasonCreateContainerError, wantEvent: "Warning Failed Error: boom",
			wantCalls: []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app"},
		},
		{
			name: "start", prepare: func(e *execEnv) { e.rt.Fail("StartContainer", boom) },
			wantNext: retryAfterError, wantWaiting: reasonRunContainerError, wantEvent: "Warning Failed Error: boom",
			wantCalls: []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app", "StartContainer"},
		},
		{
			name: "postStart hook",
			prepare: func(e *execEnv) {
				e.pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
				e.rt.OnExec(func(string, []string) ([]byte, []byte, int32) { return nil, []byte("no"), 1 })
			},
			wantNext: time.Minute, wantWaiting: reasonPostStartHookError, wantRunning: true,
			wantEvent: `Warning FailedPostStartHook PostStartHook failed: exec ["false"] exited with 1: no`,
			wantCalls: []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app", "StartContainer", "StopContainer"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExecEnv(t, execPod("app"))
			tt.prepare(e)
			if next := e.sync(); next != tt.wantNext {
				t.Errorf("next sync in %v, want %v", next, tt.wantNext)
			}
			checkCalls(t, "calls", mutations(e.rt), tt.wantCalls)
			if got := e.w.waiting["app"].Reason; got != tt.wantWaiting {
				t.Errorf("app waiting for %q, want %q", got, tt.wantWaiting)
			}
			var syncErr string
			if e.w.syncError != nil {
				syncErr = e.w.syncError.Reason
			}
			if syncErr != tt.wantSyncError {
				t.Errorf("sync error %q, want %q", syncErr, tt.wantSyncError)
			}
			if tt.wantEvent != "" && !slices.Contains(e.events.list(), tt.wantEvent) {
				t.Errorf("events %q lack %q", e.events.list(), tt.wantEvent)
			}
			if want := map[bool]v1.PodPhase{false: v1.PodPending, true: v1.PodRunning}[tt.wantRunning]; e.status(t).Phase != want {
				t.Errorf("phase %s, want %s", e.status(t).Phase, want)
			}
		})
	}
}

// A regular init container that cannot start holds back the app
// containers; the next sync, the fault gone, starts it.
func TestExecuteInitFailureHoldsBackApps(t *testing.T) {
	pod := execPod("app")
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent}}
	e := newExecEnv(t, pod)
	e.rt.FailOnce("CreateContainer init", errors.New("boom"))
	if next := e.sync(); next != retryAfterError {
		t.Errorf("next sync in %v, want %v", next, retryAfterError)
	}
	checkCalls(t, "calls", mutations(e.rt), []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer init"})
	e.rt.ClearCalls()
	e.sync()
	checkCalls(t, "calls once healed", mutations(e.rt), []string{"CreateContainer init", "StartContainer"})
	e.rt.Exit(e.containerID(t, "init"), 0, "Completed")
	e.rt.ClearCalls()
	e.sync()
	checkCalls(t, "calls once initialized", mutations(e.rt), []string{"CreateContainer app", "StartContainer"})
}

// A pod killed while a container is being created starts nothing more, and
// its termination then removes everything.
func TestExecuteKillDuringStart(t *testing.T) {
	e := newExecEnv(t, execPod("a", "b"))
	e.rt.OnCall(func(_ context.Context, call string) error {
		if call == "CreateContainer a" {
			e.w.kill()
		}
		return nil
	})
	e.sync()
	checkCalls(t, "calls", mutations(e.rt), []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer a"})
	if len(e.w.waiting) != 0 {
		t.Errorf("waiting %+v: a start cut short by the kill is no failure", e.w.waiting)
	}
	if len(e.rt.Containers()) != 0 {
		t.Errorf("containers %q, want none created", e.rt.Containers())
	}
	if err := e.w.terminate(context.Background(), e.pod, e.w.ws.deps.Log); err != nil {
		t.Fatal(err)
	}
	if len(e.rt.Sandboxes()) != 0 || !e.vols.tornDown {
		t.Errorf("sandboxes %q left, volumes torn down %v", e.rt.Sandboxes(), e.vols.tornDown)
	}
	if _, ok := e.w.ws.deps.Status.Get(e.pod.UID); ok {
		t.Error("the pod's status outlived it")
	}
}

// A pod whose sandbox died is stopped before it gets a new one: when a
// container cannot be stopped, no new sandbox is created until it can.
func TestExecuteStopFailureKeepsSandboxDown(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	e.sync()
	sb := e.rt.Sandboxes()[0]
	e.rt.SetSandboxState(sb, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	e.rt.Fail("StopContainer", errors.New("boom"))
	e.rt.ClearCalls()
	if next := e.sync(); next != retryAfterError {
		t.Errorf("next sync in %v, want %v", next, retryAfterError)
	}
	checkCalls(t, "calls", mutations(e.rt), []string{"StopContainer"})
	e.rt.Heal()
	e.rt.ClearCalls()
	e.sync()
	checkCalls(t, "calls once healed", mutations(e.rt), []string{"StopContainer", "RunPodSandbox u1", "CreateContainer app", "StartContainer"})
	// The pod was stopped: the sync reads it whole again, and publishes
	// the stopped instance as it exited, not as the sync assumed it did.
	checkCalls(t, "reads once healed", e.rt.CallsOf("PodStatus", "ReadContainerStatus"), []string{"PodStatus u1", "PodStatus u1"})
	checkPublishedAsRead(t, e)
}

// checkPublishedAsRead checks that the pod's published status is what a
// read of the whole pod from the runtime makes of it.
func checkPublishedAsRead(t *testing.T, e *execEnv) {
	t.Helper()
	published := e.status(t)
	fresh, err := e.rt.PodStatus(context.Background(), e.pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	e.w.publish(e.pod, fresh, false)
	if want := e.status(t); !apiequality.Semantic.DeepEqual(published, want) {
		t.Errorf("published %+v\nwant as from a full read %+v", published.ContainerStatuses, want.ContainerStatuses)
	}
}

// A container that keeps failing waits out its crash-loop back-off, with
// the kubelet's reason and event, and starts again once the fake clock
// passes it.
func TestExecuteBackOffExpires(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	e.sync()
	e.rt.Exit(e.containerID(t, "app"), 1, "Error")
	e.sync() // the first restart is at once
	e.rt.Exit(e.containerID(t, "app"), 1, "Error")
	e.rt.ClearCalls()
	if next := e.sync(); next != BackOffInitial {
		t.Errorf("next sync in %v, want the back-off's %v", next, BackOffInitial)
	}
	checkCalls(t, "calls in back-off", mutations(e.rt), nil)
	// Waiting out a back-off does no I/O: the sync's one read stands.
	checkCalls(t, "reads in back-off", e.rt.CallsOf("PodStatus", "SandboxStatus"), []string{"PodStatus u1"})
	if got := e.w.waiting["app"].Reason; got != reasonCrashLoopBackOff {
		t.Errorf("waiting for %q, want %s", got, reasonCrashLoopBackOff)
	}
	if want := "Warning BackOff Back-off restarting failed container app in pod web_default(u1)"; !slices.Contains(e.events.list(), want) {
		t.Errorf("events %q lack %q", e.events.list(), want)
	}
	e.clk.Step(BackOffInitial - time.Second)
	if next := e.sync(); next != time.Second {
		t.Errorf("next sync in %v, want the second left", next)
	}
	e.clk.Step(time.Second)
	e.rt.ClearCalls()
	e.sync()
	// The oldest instance goes; the newest exited one stays for lastState.
	checkCalls(t, "calls once the back-off expired", mutations(e.rt), []string{"CreateContainer app", "StartContainer", "RemoveContainer"})
	st := e.status(t)
	if _, waiting := e.w.waiting["app"]; waiting || st.ContainerStatuses[0].RestartCount != 2 || st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("app %+v, want it running after 2 restarts", st.ContainerStatuses[0])
	}
	if last := st.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
		t.Errorf("app's lastState %+v, want the instance before, exited 1", st.ContainerStatuses[0].LastTerminationState)
	}
	// The new instance is read alone: one read of the whole pod per sync.
	checkCalls(t, "reads of the restart", e.rt.CallsOf("PodStatus", "ReadContainerStatus"), []string{"PodStatus u1", "ReadContainerStatus " + e.containerID(t, "app")})
}

// A container whose spec changed is stopped and started anew in one sync;
// what the sync publishes is what a read of the whole pod shows, though
// it read only the two instances it stopped and made.
func TestExecuteReplacementObserved(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	e.sync()
	old := e.containerID(t, "app")
	pod := e.pod.DeepCopy()
	pod.Spec.Containers[0].Image = "busybox:2"
	e.pod = pod
	e.rt.ClearCalls()
	e.sync()
	checkCalls(t, "calls", mutations(e.rt), []string{"StopContainer", "PullImage busybox:2", "CreateContainer app", "StartContainer"})
	checkCalls(t, "reads", e.rt.CallsOf("PodStatus", "ReadContainerStatus"), []string{"PodStatus u1", "ReadContainerStatus " + old, "ReadContainerStatus " + e.containerID(t, "app")})
	checkPublishedAsRead(t, e)
	if cs := e.status(t).ContainerStatuses[0]; cs.Image != "busybox:2" || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil {
		t.Errorf("app %+v, want the new image running with the old instance as lastState", cs)
	}
}

// A status read that fails ends the sync before any step, and the worker
// retries soon; one after the steps leaves the status as it was.
func TestExecuteStatusReadFails(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	e.rt.Fail("PodStatus", errors.New("runtime down"))
	if next := e.sync(); next != retryAfterError {
		t.Errorf("next sync in %v, want %v", next, retryAfterError)
	}
	checkCalls(t, "calls", e.rt.Calls(), []string{"PodStatus u1"})
	if _, ok := e.w.ws.deps.Status.Get(e.pod.UID); ok {
		t.Error("a status was published without the runtime's")
	}

	e.rt.Heal()
	e.rt.Fail("ReadContainerStatus", errors.New("runtime down"))
	if next := e.sync(); next != retryAfterError {
		t.Errorf("next sync in %v, want %v", next, retryAfterError)
	}
	if len(e.rt.Containers()) != 1 || e.status(t).Phase != v1.PodPending {
		t.Errorf("containers %q, phase %s; want the container started and the pod still shown Pending", e.rt.Containers(), e.status(t).Phase)
	}
}

// A pod off the host's network waits for the pod network with the
// kubelet's NetworkNotReady event, creating nothing; a host-network pod
// does not wait; once the network is ready the pod starts.
func TestExecuteWaitsForTheNetwork(t *testing.T) {
	notReady := errors.New("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:no CNI configuration file in /x (--cni-conf-dir)")
	e := newExecEnv(t, execPod("app"))
	var netErr error = notReady
	e.w.ws.deps.NetworkNotReady = func(context.Context) error { return netErr }
	if next := e.sync(); next != retryAfterError {
		t.Errorf("next sync in %v, want %v", next, retryAfterError)
	}
	checkCalls(t, "calls while the network is not ready", mutations(e.rt), nil)
	want := "Warning NetworkNotReady network is not ready: " + notReady.Error()
	if !slices.Contains(e.events.list(), want) {
		t.Errorf("events %q lack %q", e.events.list(), want)
	}
	if e.w.syncError == nil || e.w.syncError.Reason != "NetworkNotReady" {
		t.Errorf("sync error %+v", e.w.syncError)
	}
	netErr = nil
	e.sync()
	checkCalls(t, "calls once the network is ready", mutations(e.rt), []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app", "StartContainer"})

	host := execPod("app")
	host.Spec.HostNetwork = true
	e = newExecEnv(t, host)
	e.w.ws.deps.NetworkNotReady = func(context.Context) error { return notReady }
	e.sync()
	checkCalls(t, "calls of a host-network pod", mutations(e.rt), []string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app", "StartContainer"})
}

// A volume that cannot be set up (a claim not bound, a volume not attached,
// a driver that fails) is retried with a growing back-off, reset once it is
// set up; other pods have their own.
func TestExecuteVolumeFailureBacksOff(t *testing.T) {
	e := newExecEnv(t, execPod("app"))
	e.vols.setupErr = errors.New("error processing PVC default/data: PVC is not bound")
	var waits []time.Duration
	for range 3 {
		waits = append(waits, e.sync())
	}
	if waits[0] != retryAfterError || waits[1] <= waits[0] || waits[2] <= waits[1] {
		t.Fatalf("retries after %v, want a growing back-off from %v", waits, retryAfterError)
	}
	if want := "Warning FailedMount MountVolume.SetUp failed: error processing PVC default/data: PVC is not bound"; !slices.Contains(e.events.list(), want) {
		t.Errorf("events %q lack %q", e.events.list(), want)
	}
	if e.status(t).Phase != v1.PodPending {
		t.Errorf("phase %s, want Pending", e.status(t).Phase)
	}
	e.vols.setupErr = nil
	e.sync()
	if e.w.ws.prepareBackOff.Get(volumeBackOffKey(e.pod.UID)) != 0 {
		t.Error("the back-off stays after the volumes are set up")
	}
}
