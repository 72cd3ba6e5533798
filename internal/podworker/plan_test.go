package podworker

import (
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/kuberuntime"
)

func testPod(policy v1.RestartPolicy, inits []string, apps ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web-node1", "default", "uid1"
	pod.Spec.RestartPolicy = policy
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type ctr struct {
	name  string
	state container.State
	exit  int32
}

// runtimeStatus builds a PodStatus with one ready sandbox (unless sandbox is
// "none" or "dead") and the containers given, oldest first.
func runtimeStatus(pod *v1.Pod, sandbox string, ctrs ...ctr) *container.PodStatus {
	st := &container.PodStatus{UID: pod.UID}
	switch sandbox {
	case "ready":
		st.Sandboxes = []container.SandboxStatus{{ID: "sb1", Attempt: 0, Ready: true, IP: "10.88.0.2"}}
	case "dead":
		st.Sandboxes = []container.SandboxStatus{{ID: "sb1", Attempt: 0, Ready: false}}
	case "noip":
		st.Sandboxes = []container.SandboxStatus{{ID: "sb1", Attempt: 0, Ready: true}}
	}
	for i := len(ctrs) - 1; i >= 0; i-- { // newest first
		c := ctrs[i]
		hash := ""
		for _, sc := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if sc.Name == c.name {
				hash = kuberuntime.ContainerHash(&sc)
			}
		}
		st.Containers = append(st.Containers, container.ContainerStatus{
			ID: c.name + "-" + string(rune('a'+i)), Name: c.name, SandboxID: "sb1", State: c.state,
			ExitCode: c.exit, CreatedAt: t0.Add(time.Duration(i) * time.Second), Hash: hash,
		})
	}
	return st
}

func TestComputePlan(t *testing.T) {
	running := container.StateRunning
	exited := container.StateExited
	tests := []struct {
		name   string
		pod    *v1.Pod
		st     func(*v1.Pod) *container.PodStatus
		failed map[string]string // container ID -> probe that condemned it
		// started lists the containers whose startup probe passed.
		started map[string]bool
		want    Plan
	}{
		{
			name: "new pod: sandbox and every app container",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a", "b"),
			st:   func(p *v1.Pod) *container.PodStatus { return runtimeStatus(p, "none") },
			want: Plan{KillPod: true, CreateSandbox: true, Start: []int{0, 1}},
		},
		{
			name: "new pod with init containers: first init only",
			pod:  testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			st:   func(p *v1.Pod) *container.PodStatus { return runtimeStatus(p, "none") },
			want: Plan{KillPod: true, CreateSandbox: true, StartInit: []int{0}},
		},
		{
			name: "first init done: second init next",
			pod:  testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", exited, 0})
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{1}},
		},
		{
			name: "init still running: wait",
			pod:  testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", running, 0})
			},
			want: Plan{SandboxID: "sb1"},
		},
		{
			name: "all inits done: app containers",
			pod:  testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a", "b"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", exited, 0}, ctr{"i2", exited, 0})
			},
			want: Plan{SandboxID: "sb1", Start: []int{0, 1}},
		},
		{
			name: "failed init with Always: retry it",
			pod:  testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", exited, 0}, ctr{"i2", exited, 1})
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{1}},
		},
		{
			name: "failed init with Never: the pod is dead",
			pod:  testPod(v1.RestartPolicyNever, []string{"i1"}, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", exited, 2})
			},
			want: Plan{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "everything running: nothing to do",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a", "b"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0}, ctr{"b", running, 0})
			},
			want: Plan{SandboxID: "sb1"},
		},
		{
			name: "Always restarts a container that exited 0",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a", "b"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0}, ctr{"b", exited, 0})
			},
			want: Plan{SandboxID: "sb1", Start: []int{1}},
		},
		{
			name: "OnFailure leaves a success alone and restarts a failure",
			pod:  testPod(v1.RestartPolicyOnFailure, nil, "a", "b"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", exited, 0}, ctr{"b", exited, 1})
			},
			want: Plan{SandboxID: "sb1", Start: []int{1}},
		},
		{
			name: "Never with everything exited: stop the sandbox",
			pod:  testPod(v1.RestartPolicyNever, nil, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", exited, 1})
			},
			want: Plan{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "dead sandbox: new sandbox with the next attempt",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "dead", ctr{"a", exited, 137})
			},
			want: Plan{KillPod: true, CreateSandbox: true, SandboxID: "sb1", SandboxAttempt: 1, Start: []int{0}},
		},
		{
			name: "dead sandbox with Never after containers ran: leave it",
			pod:  testPod(v1.RestartPolicyNever, nil, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "dead", ctr{"a", exited, 0})
			},
			want: Plan{KillPod: true, SandboxID: "sb1", SandboxAttempt: 1},
		},
		{
			name: "bridge sandbox without an IP is replaced",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a"),
			st:   func(p *v1.Pod) *container.PodStatus { return runtimeStatus(p, "noip") },
			want: Plan{KillPod: true, CreateSandbox: true, SandboxID: "sb1", SandboxAttempt: 1, Start: []int{0}},
		},
		{
			name: "a container left in created state is replaced",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", container.StateCreated, 0})
			},
			want: Plan{SandboxID: "sb1", Start: []int{0},
				Kill: []Kill{{ID: "a-a", Name: "a", Reason: "container in state created is replaced"}}},
		},
		{
			name: "a running container whose spec changed is restarted",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				st := runtimeStatus(p, "ready", ctr{"a", running, 0})
				st.Containers[0].Hash = "stale"
				return st
			},
			want: Plan{SandboxID: "sb1", Start: []int{0},
				Kill: []Kill{{ID: "a-a", Name: "a", Reason: "container spec changed, will be restarted"}}},
		},
		{
			name: "a failed liveness probe kills and restarts the container",
			pod:  testPod(v1.RestartPolicyAlways, nil, "a", "b"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0}, ctr{"b", running, 0})
			},
			failed: map[string]string{"b-b": "liveness"},
			want: Plan{SandboxID: "sb1", Start: []int{1},
				Kill: []Kill{{ID: "b-b", Name: "b", Reason: "Container b failed liveness probe, will be restarted"}}},
		},
		{
			name: "a probe's own grace period applies to the kill it causes",
			pod: func() *v1.Pod {
				p := testPod(v1.RestartPolicyAlways, nil, "a")
				p.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: ptr(int64(3))}
				return p
			}(),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0})
			},
			failed: map[string]string{"a-a": "liveness"},
			want: Plan{SandboxID: "sb1", Start: []int{0},
				Kill: []Kill{{ID: "a-a", Name: "a", Reason: "Container a failed liveness probe, will be restarted", GracePeriod: ptr(int64(3))}}},
		},
		{
			name: "a failed startup probe with Never kills the container for good",
			pod:  testPod(v1.RestartPolicyNever, nil, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0})
			},
			failed: map[string]string{"a-a": "startup"},
			want: Plan{KillPod: true, SandboxID: "sb1",
				Kill: []Kill{{ID: "a-a", Name: "a", Reason: "Container a failed startup probe"}}},
		},
		{
			name: "running app containers mean the inits are done, even if GC removed them",
			pod:  testPod(v1.RestartPolicyAlways, []string{"i1"}, "a", "b"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0}, ctr{"b", exited, 1})
			},
			want: Plan{SandboxID: "sb1", Start: []int{1}},
		},
		{
			name: "new pod with a sidecar: the sidecar first",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"),
			st:   func(p *v1.Pod) *container.PodStatus { return runtimeStatus(p, "none") },
			want: Plan{KillPod: true, CreateSandbox: true, StartInit: []int{0}},
		},
		{
			name: "a running sidecar without a startup probe has started: next init",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0})
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{1}},
		},
		{
			name: "a sidecar waits for its startup probe",
			pod:  withStartupProbe(withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0})
			},
			want: Plan{SandboxID: "sb1"},
		},
		{
			name: "a sidecar that passed its startup probe lets the next init start",
			pod:  withStartupProbe(withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0})
			},
			started: map[string]bool{"s1-a": true},
			want:    Plan{SandboxID: "sb1", StartInit: []int{1}},
		},
		{
			name: "a sidecar that failed its startup probe is restarted",
			pod:  withStartupProbe(withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0})
			},
			failed: map[string]string{"s1-a": "startup"},
			want: Plan{SandboxID: "sb1", StartInit: []int{0},
				Kill: []Kill{{ID: "s1-a", Name: "s1", Reason: "Init container s1 failed startup probe"}}},
		},
		{
			name: "the last regular init done and the sidecar running: app containers",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0}, ctr{"i1", exited, 0})
			},
			want: Plan{SandboxID: "sb1", Start: []int{0}},
		},
		{
			name: "a sidecar last in the list initializes the pod once started",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"i1", "s1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", exited, 0}, ctr{"s1", running, 0})
			},
			want: Plan{SandboxID: "sb1", Start: []int{0}},
		},
		{
			name: "a regular init that runs is waited for while an earlier sidecar that exited is restarted",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", exited, 1}, ctr{"i1", running, 0})
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{0}},
		},
		{
			name: "after initialization exited sidecars restart in spec order, the app keeps running",
			pod:  withSidecars(testPod(v1.RestartPolicyNever, []string{"s1", "i1", "s2"}, "a"), "s1", "s2"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", exited, 0}, ctr{"i1", exited, 0}, ctr{"s2", exited, 137}, ctr{"a", running, 0})
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{0, 2}},
		},
		{
			name: "after initialization a sidecar gone from the runtime comes back, a regular init does not",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0})
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{0}},
		},
		{
			name: "a sidecar that failed its liveness probe is restarted",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0}, ctr{"a", running, 0})
			},
			failed: map[string]string{"s1-a": "liveness"},
			want: Plan{SandboxID: "sb1", StartInit: []int{0},
				Kill: []Kill{{ID: "s1-a", Name: "s1", Reason: "Init container s1 failed liveness probe"}}},
		},
		{
			name: "a running sidecar whose spec changed is restarted",
			pod:  withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				st := runtimeStatus(p, "ready", ctr{"s1", running, 0}, ctr{"a", running, 0})
				st.Containers[1].Hash = "stale"
				return st
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{0},
				Kill: []Kill{{ID: "s1-a", Name: "s1", Reason: "Init container spec hash changed"}}},
		},
		{
			name: "sidecars do not keep a finished pod alive",
			pod:  withSidecars(testPod(v1.RestartPolicyNever, []string{"s1", "s2"}, "a"), "s1", "s2"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0}, ctr{"s2", exited, 1}, ctr{"a", exited, 0})
			},
			want: Plan{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "a failed regular init after a sidecar with Never kills the pod",
			pod:  withSidecars(testPod(v1.RestartPolicyNever, []string{"s1", "i1"}, "a"), "s1"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"s1", running, 0}, ctr{"i1", exited, 1})
			},
			want: Plan{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "an ephemeral container starts once, even while the pod initializes",
			pod:  withEphemeral(testPod(v1.RestartPolicyAlways, []string{"i1"}, "a"), "debug", "debug2"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", running, 0}, ctr{"debug2", exited, 0})
			},
			want: Plan{SandboxID: "sb1", StartEphemeral: []int{0}},
		},
		{
			name: "a pod being deleted starts no ephemeral container",
			pod: func() *v1.Pod {
				p := withEphemeral(testPod(v1.RestartPolicyAlways, nil, "a"), "debug")
				p.DeletionTimestamp = &metav1.Time{Time: t0}
				return p
			}(),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"a", running, 0})
			},
			want: Plan{SandboxID: "sb1"},
		},
		{
			name: "an init container left created is replaced",
			pod:  testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			st: func(p *v1.Pod) *container.PodStatus {
				return runtimeStatus(p, "ready", ctr{"i1", exited, 0}, ctr{"i2", container.StateCreated, 0})
			},
			want: Plan{SandboxID: "sb1", StartInit: []int{1},
				Kill: []Kill{{ID: "i2-b", Name: "i2", Reason: "init container in state created is replaced"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ComputePlan(tt.pod, tt.st(tt.pod), fakeProbes{failed: tt.failed, started: tt.started})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ComputePlan:\n got  %+v\n want %+v", got, tt.want)
			}
			idle := !tt.want.KillPod && !tt.want.CreateSandbox && tt.want.StartInit == nil && tt.want.Start == nil && tt.want.StartEphemeral == nil && tt.want.Kill == nil
			if got.Idle() != idle {
				t.Errorf("Idle() = %v, want %v", got.Idle(), idle)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// withSidecars makes the named init containers sidecars.
func withSidecars(pod *v1.Pod, names ...string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	for i := range pod.Spec.InitContainers {
		if slices.Contains(names, pod.Spec.InitContainers[i].Name) {
			pod.Spec.InitContainers[i].RestartPolicy = &always
		}
	}
	return pod
}

// withStartupProbe gives the named init container a startup probe.
func withStartupProbe(pod *v1.Pod, name string) *v1.Pod {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			pod.Spec.InitContainers[i].StartupProbe = &v1.Probe{}
		}
	}
	return pod
}

// withEphemeral adds ephemeral containers of the names given.
func withEphemeral(pod *v1.Pod, names ...string) *v1.Pod {
	for _, n := range names {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
			v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox"}})
	}
	return pod
}

// fakeProbes are probe results: the failed probe of each condemned
// container, and the containers whose startup probe passed.
type fakeProbes struct {
	failed  map[string]string
	started map[string]bool
}

func (f fakeProbes) Failed(id string) string { return f.failed[id] }
func (f fakeProbes) Started(id string) bool  { return f.started[id] }

func TestEphemeralTarget(t *testing.T) {
	pod := withEphemeral(testPod(v1.RestartPolicyAlways, nil, "a", "b"), "debug", "plain")
	pod.Spec.EphemeralContainers[0].TargetContainerName = "a"
	debug := v1.Container(pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
	plain := v1.Container(pod.Spec.EphemeralContainers[1].EphemeralContainerCommon)
	running := runtimeStatus(pod, "ready", ctr{"a", container.StateRunning, 0})
	if id, err := ephemeralTarget(pod, &debug, running); err != nil || id != "a-a" {
		t.Errorf("target of debug = %q, %v; want a's running ID", id, err)
	}
	if id, err := ephemeralTarget(pod, &plain, running); err != nil || id != "" {
		t.Errorf("a container without a target got %q, %v", id, err)
	}
	if id, err := ephemeralTarget(pod, &pod.Spec.Containers[1], running); err != nil || id != "" {
		t.Errorf("an app container got target %q, %v", id, err)
	}
	exited := runtimeStatus(pod, "ready", ctr{"a", container.StateExited, 1})
	if _, err := ephemeralTarget(pod, &debug, exited); err == nil || err.Error() != "unable to find target container a" {
		t.Errorf("a target that is not running: err = %v", err)
	}
}
