package status

import (
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/container"
)

func boolPtr(b bool) *bool { return &b }

func TestGenerateNothingCreatedYet(t *testing.T) {
	for _, rt := range []*container.PodStatus{nil, {}} {
		got := Generate(input(newPod(v1.RestartPolicyAlways, nil, "b", "a"), rt))
		now := mt(100)
		want := v1.PodStatus{
			Phase: v1.PodPending,
			Conditions: []v1.PodCondition{
				{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: "PodSandboxNotReady", Message: "no pod sandbox exists", LastTransitionTime: now},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
				{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [b a]", LastTransitionTime: now},
				{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [b a]", LastTransitionTime: now},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
			},
			HostIP:    "192.0.2.10",
			HostIPs:   []v1.HostIP{{IP: "192.0.2.10"}},
			StartTime: &now,
			// Regular container statuses are sorted by name, as the kubelet's.
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "a", Image: "img-a", Started: boolPtr(false), State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
				{Name: "b", Image: "img-b", Started: boolPtr(false), State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
			},
			QOSClass: v1.PodQOSBestEffort,
		}
		mustEqual(t, "status", got, want)
	}
}

func TestGenerateRunningPod(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, []string{"init"}, "app")
	rt := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")},
		ctr("app", "c2", container.StateRunning, 5, 0),
		ctr("init", "c1", container.StateExited, 2, 0),
	)
	got := Generate(input(pod, rt))
	now := mt(100)
	want := v1.PodStatus{
		Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		},
		HostIP:    "192.0.2.10",
		HostIPs:   []v1.HostIP{{IP: "192.0.2.10"}},
		PodIP:     "10.88.0.5",
		PodIPs:    []v1.PodIP{{IP: "10.88.0.5"}},
		StartTime: &now,
		InitContainerStatuses: []v1.ContainerStatus{{
			Name: "init", Image: "img-init", ImageID: "sha256:init", ContainerID: "containerd://c1",
			Ready: true, Started: boolPtr(false),
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: mt(2), FinishedAt: mt(3), ContainerID: "containerd://c1"}},
		}},
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", Image: "img-app", ImageID: "sha256:app", ContainerID: "containerd://c2",
			Ready: true, Started: boolPtr(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: mt(5)}},
		}},
		QOSClass: v1.PodQOSBestEffort,
	}
	mustEqual(t, "status", got, want)
}

func TestGenerateDefaultWaitingReasons(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "app")
	rt := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}, ctr("i1", "c1", container.StateRunning, 1, 0))
	got := Generate(input(pod, rt))
	if w := statusOf(t, got.InitContainerStatuses, "i2").State.Waiting; w == nil || w.Reason != ReasonPodInitializing {
		t.Errorf("i2 waiting = %+v, want PodInitializing", w)
	}
	if w := statusOf(t, got.ContainerStatuses, "app").State.Waiting; w == nil || w.Reason != ReasonPodInitializing {
		t.Errorf("app waiting = %+v, want PodInitializing", w)
	}
	init := condition(t, got, v1.PodInitialized)
	if init.Status != v1.ConditionFalse || init.Reason != ReasonContainersNotInitialized ||
		init.Message != "containers with incomplete status: [i1 i2]" {
		t.Errorf("Initialized = %+v", init)
	}
	if got.Phase != v1.PodPending {
		t.Errorf("phase = %s, want Pending", got.Phase)
	}
	if got.InitContainerStatuses[0].Name != "i1" || got.InitContainerStatuses[1].Name != "i2" {
		t.Errorf("init statuses not in spec order: %s, %s", got.InitContainerStatuses[0].Name, got.InitContainerStatuses[1].Name)
	}
}

func TestGenerateWaitingReasons(t *testing.T) {
	backoff := Waiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container=app pod=web_default(uid-1)"}
	sb := []container.SandboxStatus{readySandbox("10.88.0.5")}
	tests := []struct {
		name          string
		policy        v1.RestartPolicy
		runtime       []container.ContainerStatus
		waiting       map[string]Waiting
		terminating   bool
		wantWaiting   *v1.ContainerStateWaiting
		wantLastExit  *int32 // exit code of lastState.terminated, nil for none
		wantTermExit  *int32 // exit code of state.terminated, nil for none
		wantPhase     v1.PodPhase
		wantRestarted int32
	}{
		{
			name:        "image pull error before any container exists",
			policy:      v1.RestartPolicyAlways,
			waiting:     map[string]Waiting{"app": {Reason: "ErrImagePull", Message: "pull failed"}},
			wantWaiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "pull failed"},
			wantPhase:   v1.PodPending,
		},
		{
			name:          "crash loop moves the exit to lastState",
			policy:        v1.RestartPolicyAlways,
			runtime:       []container.ContainerStatus{withRestarts(ctr("app", "c2", container.StateExited, 10, 1), 1), ctr("app", "c1", container.StateExited, 5, 1)},
			waiting:       map[string]Waiting{"app": backoff},
			wantWaiting:   &v1.ContainerStateWaiting{Reason: backoff.Reason, Message: backoff.Message},
			wantLastExit:  int32Ptr(1),
			wantPhase:     v1.PodRunning,
			wantRestarted: 1,
		},
		{
			name:         "no recorded reason keeps the terminated state",
			policy:       v1.RestartPolicyAlways,
			runtime:      []container.ContainerStatus{ctr("app", "c1", container.StateExited, 5, 1)},
			wantTermExit: int32Ptr(1),
			wantPhase:    v1.PodRunning,
		},
		{
			name:         "Never: a stale reason is not shown",
			policy:       v1.RestartPolicyNever,
			runtime:      []container.ContainerStatus{ctr("app", "c1", container.StateExited, 5, 1)},
			waiting:      map[string]Waiting{"app": backoff},
			wantTermExit: int32Ptr(1),
			wantPhase:    v1.PodFailed,
		},
		{
			name:         "OnFailure: success is not restarted",
			policy:       v1.RestartPolicyOnFailure,
			runtime:      []container.ContainerStatus{ctr("app", "c1", container.StateExited, 5, 0)},
			waiting:      map[string]Waiting{"app": backoff},
			wantTermExit: int32Ptr(0),
			wantPhase:    v1.PodSucceeded,
		},
		{
			name:         "OnFailure: failure is restarted",
			policy:       v1.RestartPolicyOnFailure,
			runtime:      []container.ContainerStatus{ctr("app", "c1", container.StateExited, 5, 2)},
			waiting:      map[string]Waiting{"app": backoff},
			wantWaiting:  &v1.ContainerStateWaiting{Reason: backoff.Reason, Message: backoff.Message},
			wantLastExit: int32Ptr(2),
			wantPhase:    v1.PodRunning,
		},
		{
			name:        "created but not started: start error shown",
			policy:      v1.RestartPolicyAlways,
			runtime:     []container.ContainerStatus{ctr("app", "c1", container.StateCreated, 5, 0)},
			waiting:     map[string]Waiting{"app": {Reason: "RunContainerError", Message: "exec: not found"}},
			wantWaiting: &v1.ContainerStateWaiting{Reason: "RunContainerError", Message: "exec: not found"},
			wantPhase:   v1.PodPending,
		},
		{
			name:        "created but not started, no reason: empty waiting",
			policy:      v1.RestartPolicyAlways,
			runtime:     []container.ContainerStatus{ctr("app", "c1", container.StateCreated, 5, 0)},
			wantWaiting: &v1.ContainerStateWaiting{},
			wantPhase:   v1.PodPending,
		},
		{
			name:        "running: a stale reason is not shown",
			policy:      v1.RestartPolicyAlways,
			runtime:     []container.ContainerStatus{ctr("app", "c1", container.StateRunning, 5, 0)},
			waiting:     map[string]Waiting{"app": backoff},
			wantPhase:   v1.PodRunning,
			wantWaiting: nil,
		},
		{
			name:         "terminating: nothing restarts, so no reason",
			policy:       v1.RestartPolicyAlways,
			runtime:      []container.ContainerStatus{ctr("app", "c1", container.StateExited, 5, 0)},
			waiting:      map[string]Waiting{"app": backoff},
			terminating:  true,
			wantTermExit: int32Ptr(0),
			wantPhase:    v1.PodSucceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(newPod(tt.policy, nil, "app"), runtimeOf(sb, tt.runtime...))
			in.Waiting, in.Terminating = tt.waiting, tt.terminating
			got := Generate(in)
			st := statusOf(t, got.ContainerStatuses, "app")
			mustEqual(t, "waiting", st.State.Waiting, tt.wantWaiting)
			mustEqual(t, "lastState exit", exitOf(st.LastTerminationState), tt.wantLastExit)
			mustEqual(t, "state exit", exitOf(st.State), tt.wantTermExit)
			if got.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", got.Phase, tt.wantPhase)
			}
			if st.RestartCount != tt.wantRestarted {
				t.Errorf("restartCount = %d, want %d", st.RestartCount, tt.wantRestarted)
			}
		})
	}
}

func withRestarts(c container.ContainerStatus, n int) container.ContainerStatus {
	c.RestartCount = n
	return c
}

func int32Ptr(i int32) *int32 { return &i }

func exitOf(s v1.ContainerState) *int32 {
	if s.Terminated == nil {
		return nil
	}
	return &s.Terminated.ExitCode
}

func TestGenerateLastTerminationState(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "app")
	oom := ctr("app", "c1", container.StateExited, 5, 137)
	oom.Reason, oom.Message = "OOMKilled", "bye"
	rt := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")},
		// Deliberately oldest first: the newest by creation time counts.
		ctr("app", "c0", container.StateExited, 1, 0),
		oom,
		withRestarts(ctr("app", "c2", container.StateRunning, 10, 0), 2),
	)
	st := statusOf(t, Generate(input(pod, rt)).ContainerStatuses, "app")
	if st.ContainerID != "containerd://c2" || st.State.Running == nil || st.RestartCount != 2 {
		t.Errorf("state = %+v id=%s restarts=%d, want running c2 with 2 restarts", st.State, st.ContainerID, st.RestartCount)
	}
	want := &v1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: "bye",
		StartedAt: mt(5), FinishedAt: mt(6), ContainerID: "containerd://c1"}
	mustEqual(t, "lastState", st.LastTerminationState.Terminated, want)
}

func TestGenerateTerminatedReason(t *testing.T) {
	for _, tt := range []struct {
		exit          int32
		runtimeReason string
		want          string
	}{
		{0, "", "Completed"},
		{1, "", "Error"},
		{137, "OOMKilled", "OOMKilled"},
		{0, "Completed", "Completed"},
	} {
		c := ctr("app", "c1", container.StateExited, 5, tt.exit)
		c.Reason = tt.runtimeReason
		got := Generate(input(newPod(v1.RestartPolicyNever, nil, "app"), runtimeOf(nil, c)))
		if r := got.ContainerStatuses[0].State.Terminated.Reason; r != tt.want {
			t.Errorf("exit %d runtime reason %q: reason = %q, want %q", tt.exit, tt.runtimeReason, r, tt.want)
		}
	}
}

func TestGenerateLostContainers(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "app")
	prev := &v1.PodStatus{
		Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: 3, ContainerID: "containerd://c1",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: mt(5)}}}},
	}
	t.Run("runtime state unknown", func(t *testing.T) {
		in := input(pod, runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}, ctr("app", "c1", container.StateUnknown, 5, 0)))
		in.Previous = prev
		got := Generate(in)
		st := got.ContainerStatuses[0]
		want := &v1.ContainerStateTerminated{Reason: "ContainerStatusUnknown",
			Message: "The container could not be located when the pod was terminated", ExitCode: 137}
		mustEqual(t, "state", st.State.Terminated, want)
		if st.RestartCount != 4 {
			t.Errorf("restartCount = %d, want 4", st.RestartCount)
		}
	})
	t.Run("container gone from the runtime", func(t *testing.T) {
		in := input(pod, runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}))
		in.Previous = prev
		got := Generate(in)
		st := got.ContainerStatuses[0]
		if st.State.Waiting == nil || st.State.Waiting.Reason != ReasonContainerCreating {
			t.Errorf("state = %+v, want waiting ContainerCreating", st.State)
		}
		if lt := st.LastTerminationState.Terminated; lt == nil || lt.Reason != "ContainerStatusUnknown" || lt.ExitCode != 137 {
			t.Errorf("lastState = %+v, want ContainerStatusUnknown 137", lt)
		}
		if st.RestartCount != 4 {
			t.Errorf("restartCount = %d, want 4", st.RestartCount)
		}
		// The lost container counts as stopped, not as never started.
		if got.Phase != v1.PodRunning {
			t.Errorf("phase = %s, want Running", got.Phase)
		}
	})
	t.Run("terminated status survives removal", func(t *testing.T) {
		done := v1.ContainerStatus{Name: "app", RestartCount: 1, ContainerID: "containerd://c1",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", ContainerID: "containerd://c1"}}}
		in := input(newPod(v1.RestartPolicyNever, nil, "app"), runtimeOf(nil))
		in.Previous = &v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{done}}
		got := Generate(in)
		done.Started = boolPtr(false)
		mustEqual(t, "status", got.ContainerStatuses[0], done)
		if got.Phase != v1.PodSucceeded {
			t.Errorf("phase = %s, want Succeeded", got.Phase)
		}
	})
	t.Run("removed init container of an initialized pod succeeded", func(t *testing.T) {
		p := newPod(v1.RestartPolicyAlways, []string{"init"}, "app")
		in := input(p, runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}, ctr("app", "c2", container.StateRunning, 5, 0)))
		got := Generate(in)
		st := got.InitContainerStatuses[0]
		if st.State.Terminated == nil || st.State.Terminated.Reason != "Completed" || !st.Ready {
			t.Errorf("init = %+v, want terminated Completed and ready", st)
		}
		if got.Phase != v1.PodRunning || condition(t, got, v1.PodInitialized).Status != v1.ConditionTrue {
			t.Errorf("phase %s, Initialized %+v", got.Phase, condition(t, got, v1.PodInitialized))
		}
	})
}

func TestGenerateReadiness(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "a", "b")
	rt := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")},
		ctr("a", "ca", container.StateRunning, 5, 0), ctr("b", "cb", container.StateRunning, 5, 0))
	in := input(pod, rt)
	var asked []string
	in.Ready = func(id string) bool { asked = append(asked, id); return id != "cb" }
	in.Started = func(id string) bool { return true }
	got := Generate(in)
	if !statusOf(t, got.ContainerStatuses, "a").Ready || statusOf(t, got.ContainerStatuses, "b").Ready {
		t.Errorf("ready: a=%v b=%v, want true false", statusOf(t, got.ContainerStatuses, "a").Ready, statusOf(t, got.ContainerStatuses, "b").Ready)
	}
	if strings.Join(asked, ",") != "ca,cb" {
		t.Errorf("Ready asked for %v, want runtime IDs ca, cb", asked)
	}
	for _, typ := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
		c := condition(t, got, typ)
		if c.Status != v1.ConditionFalse || c.Reason != ReasonContainersNotReady || c.Message != "containers with unready status: [b]" {
			t.Errorf("%s = %+v", typ, c)
		}
	}

	in.Started = func(id string) bool { return id != "ca" }
	in.Ready = nil
	got = Generate(in)
	a := statusOf(t, got.ContainerStatuses, "a")
	if *a.Started || a.Ready {
		t.Errorf("a: started=%v ready=%v, want not started, not ready", *a.Started, a.Ready)
	}
}

func TestGenerateSyncError(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, []string{"init"}, "app")
	in := input(pod, runtimeOf(nil))
	in.SyncError = &Waiting{Reason: "FailedCreatePodSandBox", Message: "plugin type=bridge failed: no IP"}
	in.Waiting = map[string]Waiting{"init": {Reason: "ErrImagePull", Message: "pull failed"}}
	got := Generate(in)
	c := condition(t, got, v1.PodReadyToStartContainers)
	if c.Status != v1.ConditionFalse || c.Reason != "FailedCreatePodSandBox" || c.Message != in.SyncError.Message {
		t.Errorf("PodReadyToStartContainers = %+v", c)
	}
	app := statusOf(t, got.ContainerStatuses, "app").State.Waiting
	mustEqual(t, "app waiting", app, &v1.ContainerStateWaiting{Reason: ReasonPodInitializing, Message: in.SyncError.Message})
	// A container's own failure wins over the pod's.
	init := got.InitContainerStatuses[0].State.Waiting
	mustEqual(t, "init waiting", init, &v1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "pull failed"})

	// With a ready sandbox the condition is True whatever the sync said.
	in.Runtime = runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")})
	if c := condition(t, Generate(in), v1.PodReadyToStartContainers); c.Status != v1.ConditionTrue || c.Reason != "" {
		t.Errorf("with a ready sandbox: %+v", c)
	}
}

func TestGenerateSandboxChange(t *testing.T) {
	ready := readySandbox("10.88.0.5")
	old := container.SandboxStatus{ID: "sb0", Ready: true, CreatedAt: at(-10), IP: "10.88.0.4"}
	notReady := ready
	notReady.Ready = false
	noIP := readySandbox("")
	host := readySandbox("")
	host.HostNetwork = true
	tests := []struct {
		name        string
		hostNetwork bool
		sandboxes   []container.SandboxStatus
		want        string
	}{
		{"none", false, nil, "no pod sandbox exists"},
		{"ready", false, []container.SandboxStatus{ready}, ""},
		{"two ready", false, []container.SandboxStatus{old, ready}, "multiple pod sandboxes are ready"},
		{"newest not ready", false, []container.SandboxStatus{notReady, old}, "pod sandbox is not ready"},
		{"network mode changed", true, []container.SandboxStatus{ready}, "pod sandbox network namespace mode changed"},
		{"no IP", false, []container.SandboxStatus{noIP}, "pod sandbox has no IP address"},
		{"host network needs no IP", true, []container.SandboxStatus{host}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.HostNetwork = tt.hostNetwork
			c := condition(t, Generate(input(pod, runtimeOf(tt.sandboxes))), v1.PodReadyToStartContainers)
			wantStatus, wantReason := v1.ConditionFalse, "PodSandboxNotReady"
			if tt.want == "" {
				wantStatus, wantReason = v1.ConditionTrue, ""
			}
			if c.Status != wantStatus || c.Reason != wantReason || c.Message != tt.want {
				t.Errorf("condition = %+v, want %s %q %q", c, wantStatus, wantReason, tt.want)
			}
		})
	}
}

func TestGenerateIPs(t *testing.T) {
	dual := readySandbox("fd00::5")
	dual.IPs = []string{"fd00::5", "10.88.0.5", "10.88.0.6"}
	stale := container.SandboxStatus{ID: "sb0", Ready: true, CreatedAt: at(-10), IP: "10.88.0.4"}
	notReady := readySandbox("10.88.0.7")
	notReady.Ready = false
	host := readySandbox("")
	host.HostNetwork = true
	tests := []struct {
		name        string
		hostNetwork bool
		hostIP      string
		sandboxes   []container.SandboxStatus
		want        []string
	}{
		{"single", false, "192.0.2.10", []container.SandboxStatus{readySandbox("10.88.0.5")}, []string{"10.88.0.5"}},
		{"dual stack, IPv4 node", false, "192.0.2.10", []container.SandboxStatus{dual}, []string{"10.88.0.5", "fd00::5"}},
		{"dual stack, IPv6 node", false, "2001:db8::10", []container.SandboxStatus{dual}, []string{"fd00::5", "10.88.0.5"}},
		{"dual stack, unknown node", false, "", []container.SandboxStatus{dual}, []string{"10.88.0.5", "fd00::5"}},
		{"only the newest sandbox counts", false, "192.0.2.10", []container.SandboxStatus{notReady, stale}, nil},
		{"no sandbox", false, "192.0.2.10", nil, nil},
		{"garbage discards all", false, "192.0.2.10", []container.SandboxStatus{{ID: "x", Ready: true, IP: "10.88.0.5", IPs: []string{"nope"}}}, nil},
		{"host network", true, "192.0.2.10", []container.SandboxStatus{host}, []string{"192.0.2.10"}},
		{"host network before its sandbox", true, "192.0.2.10", nil, []string{"192.0.2.10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.HostNetwork = tt.hostNetwork
			in := input(pod, runtimeOf(tt.sandboxes))
			in.HostIP = tt.hostIP
			got := Generate(in)
			var ips []string
			for _, ip := range got.PodIPs {
				ips = append(ips, ip.IP)
			}
			mustEqual(t, "podIPs", ips, tt.want)
			wantIP := ""
			if len(tt.want) > 0 {
				wantIP = tt.want[0]
			}
			if got.PodIP != wantIP {
				t.Errorf("podIP = %q, want %q", got.PodIP, wantIP)
			}
			if tt.hostIP != "" && (got.HostIP != tt.hostIP || len(got.HostIPs) != 1 || got.HostIPs[0].IP != tt.hostIP) {
				t.Errorf("hostIP = %q %v, want %q", got.HostIP, got.HostIPs, tt.hostIP)
			}
		})
	}
}

func TestGenerateStability(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "app")
	starting := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}, ctr("app", "c1", container.StateCreated, 5, 0))
	running := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}, ctr("app", "c1", container.StateRunning, 5, 0))

	in := input(pod, starting)
	in.Now = at(10)
	first := Generate(in)

	in = input(pod, running)
	in.Now, in.Previous = at(20), &first
	second := Generate(in)

	if !second.StartTime.Equal(first.StartTime) || !second.StartTime.Time.Equal(at(10)) {
		t.Errorf("startTime moved: %v then %v", first.StartTime, second.StartTime)
	}
	wantTransition := map[v1.PodConditionType]time.Time{
		v1.PodReadyToStartContainers: at(10), // True both times
		v1.PodInitialized:            at(10),
		v1.PodScheduled:              at(10),
		v1.PodReady:                  at(20), // False, then True
		v1.ContainersReady:           at(20),
	}
	for typ, want := range wantTransition {
		if got := condition(t, second, typ).LastTransitionTime; !got.Time.Equal(want) {
			t.Errorf("%s lastTransitionTime = %v, want %v", typ, got, want)
		}
	}

	in.Now, in.Previous = at(30), &second
	third := Generate(in)
	if !equality.Semantic.DeepEqual(second, third) {
		t.Errorf("an unchanged pod changed status between syncs")
	}
}

func TestGenerateIsPure(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, []string{"init"}, "b", "a", "c")
	rt := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")},
		ctr("a", "c3", container.StateRunning, 4, 0),
		ctr("init", "c1", container.StateExited, 1, 0),
		ctr("b", "c2", container.StateExited, 3, 1),
		ctr("b", "c4", container.StateExited, 6, 1),
	)
	prev := &v1.PodStatus{
		StartTime: ptrTime(mt(1)),
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "b", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}},
			// Gone from the runtime: its last status is carried over, and
			// normalised on the way out.
			{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				ExitCode: 1, StartedAt: metav1.NewTime(at(3).Add(300 * time.Millisecond))}}},
		},
	}
	in := input(pod, rt)
	in.Previous = prev
	in.Waiting = map[string]Waiting{"b": {Reason: "CrashLoopBackOff", Message: "back-off 10s"}}
	podBefore, rtBefore, prevBefore := pod.DeepCopy(), *rt, prev.DeepCopy()
	rtContainersBefore := append([]container.ContainerStatus(nil), rt.Containers...)

	a, b := Generate(in), Generate(in)
	if !equality.Semantic.DeepEqual(a, b) {
		t.Errorf("same input, different output")
	}
	mustEqual(t, "pod after Generate", pod, podBefore)
	mustEqual(t, "previous after Generate", prev, prevBefore)
	if !reflect.DeepEqual(rt.Containers, rtContainersBefore) {
		t.Errorf("Generate reordered or changed the runtime's containers")
	}
	if rt.Name != rtBefore.Name || len(rt.Sandboxes) != len(rtBefore.Sandboxes) {
		t.Errorf("runtime status changed")
	}
	// Mutating the output does not reach the input.
	a.ContainerStatuses[0].Name = "changed"
	if prev.ContainerStatuses[0].Name != "b" {
		t.Errorf("output aliases Previous")
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func TestGenerateNormalizes(t *testing.T) {
	pod := newPod(v1.RestartPolicyNever, nil, "a", "b")
	long := ctr("a", "c1", container.StateExited, 5, 1)
	long.StartedAt = long.StartedAt.Add(123 * time.Millisecond)
	long.Message = strings.Repeat("x", 10000)
	in := input(pod, runtimeOf(nil, long))
	in.Now = at(100).Add(999 * time.Millisecond)
	got := Generate(in)
	term := statusOf(t, got.ContainerStatuses, "a").State.Terminated
	if !term.StartedAt.Time.Equal(at(5)) {
		t.Errorf("startedAt = %v, want %v (whole seconds)", term.StartedAt, at(5))
	}
	if len(term.Message) != 12*1024/2 {
		t.Errorf("termination message is %d bytes, want the 6144-byte share", len(term.Message))
	}
	if !got.StartTime.Time.Equal(at(100)) || !got.Conditions[0].LastTransitionTime.Time.Equal(at(100)) {
		t.Errorf("startTime %v, transition %v: want whole seconds", got.StartTime, got.Conditions[0].LastTransitionTime)
	}
}

func TestGenerateRuntimeName(t *testing.T) {
	in := input(newPod(v1.RestartPolicyAlways, nil, "app"),
		runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}, ctr("app", "abc", container.StateRunning, 1, 0)))
	in.RuntimeName = "cri-o"
	if id := Generate(in).ContainerStatuses[0].ContainerID; id != "cri-o://abc" {
		t.Errorf("containerID = %q, want cri-o://abc", id)
	}
}

func TestGenerateTerminating(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "a", "b")
	sb := []container.SandboxStatus{readySandbox("10.88.0.5")}
	in := input(pod, runtimeOf(sb, ctr("a", "ca", container.StateExited, 5, 0), ctr("b", "cb", container.StateRunning, 5, 0)))
	in.Terminating = true
	in.Previous = &v1.PodStatus{Phase: v1.PodRunning}
	got := Generate(in)
	if got.Phase != v1.PodRunning {
		t.Errorf("while stopping: phase = %s, want Running", got.Phase)
	}
	if statusOf(t, got.ContainerStatuses, "b").State.Running == nil {
		t.Errorf("a container being stopped must still show running")
	}

	stopped := sb[0]
	stopped.Ready = false
	in.Runtime = runtimeOf([]container.SandboxStatus{stopped}, ctr("a", "ca", container.StateExited, 5, 0), ctr("b", "cb", container.StateExited, 5, 143))
	got = Generate(in)
	if got.Phase != v1.PodFailed {
		t.Errorf("once stopped: phase = %s, want Failed", got.Phase)
	}
	for _, typ := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
		if c := condition(t, got, typ); c.Status != v1.ConditionFalse || c.Reason != ReasonPodFailed {
			t.Errorf("%s = %+v, want False PodFailed", typ, c)
		}
	}
	if len(got.PodIPs) != 0 {
		t.Errorf("podIPs = %v after the sandbox stopped", got.PodIPs)
	}
}

func TestGeneratePhaseNeverLeavesTerminal(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "app")
	in := input(pod, runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")}, ctr("app", "c1", container.StateRunning, 1, 0)))
	in.Previous = &v1.PodStatus{Phase: v1.PodSucceeded, Reason: "Done", Message: "all done"}
	got := Generate(in)
	if got.Phase != v1.PodSucceeded || got.Reason != "Done" || got.Message != "all done" {
		t.Errorf("phase %s reason %q message %q, want Succeeded kept with its reason", got.Phase, got.Reason, got.Message)
	}
	in.Previous = &v1.PodStatus{Phase: v1.PodPending, Reason: "Stale"}
	if got := Generate(in); got.Reason != "" {
		t.Errorf("reason %q survived a phase change", got.Reason)
	}
}

func TestGenerateSidecar(t *testing.T) {
	pod := withSidecarPod(newPod(v1.RestartPolicyNever, nil, "app"), "proxy")
	rt := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")},
		ctr("proxy", "cs", container.StateRunning, 1, 0), ctr("app", "ca", container.StateRunning, 2, 0))
	in := input(pod, rt)
	in.Ready = func(id string) bool { return id != "cs" }
	got := Generate(in)
	sc := got.InitContainerStatuses[0]
	if !*sc.Started || sc.Ready {
		t.Errorf("sidecar started=%v ready=%v, want started, not ready", *sc.Started, sc.Ready)
	}
	if c := condition(t, got, v1.ContainersReady); c.Message != "containers with unready status: [proxy]" {
		t.Errorf("ContainersReady = %+v", c)
	}
	if c := condition(t, got, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("Initialized = %+v", c)
	}

	// A crashed sidecar restarts whatever the pod's policy.
	in.Runtime = runtimeOf(rt.Sandboxes, ctr("proxy", "cs", container.StateExited, 1, 1), ctr("app", "ca", container.StateRunning, 2, 0))
	in.Waiting = map[string]Waiting{"proxy": {Reason: "CrashLoopBackOff", Message: "back-off"}}
	got = Generate(in)
	if w := got.InitContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
		t.Errorf("sidecar state = %+v, want CrashLoopBackOff", got.InitContainerStatuses[0].State)
	}
	if got.Phase != v1.PodRunning {
		t.Errorf("phase = %s, want Running", got.Phase)
	}
}

func withSidecarPod(p *v1.Pod, name string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: name, Image: "img-" + name, RestartPolicy: &always})
	return p
}

// Ephemeral containers get statuses of their own, sorted by name: waiting
// before they run, running, then terminated for good (never restarted,
// whatever the pod's policy), never ready; they change neither the phase
// nor the conditions.
func TestGenerateEphemeral(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "app")
	for _, n := range []string{"dbg2", "dbg1", "dbg3"} {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
			v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "img-" + n}})
	}
	rt := runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")},
		ctr("dbg1", "e1", container.StateRunning, 5, 0),
		ctr("dbg2", "e2", container.StateExited, 4, 1),
		ctr("app", "a1", container.StateRunning, 1, 0))
	in := input(pod, rt)
	// A failed start of dbg2 would show, but it has exited: it stays so.
	in.Waiting = map[string]Waiting{"dbg2": {Reason: "CrashLoopBackOff"}}
	s := Generate(in)
	var names []string
	for _, st := range s.EphemeralContainerStatuses {
		names = append(names, st.Name)
		if st.Ready {
			t.Errorf("ephemeral container %s is ready", st.Name)
		}
	}
	mustEqual(t, "ephemeral names", names, []string{"dbg1", "dbg2", "dbg3"})
	if st := statusOf(t, s.EphemeralContainerStatuses, "dbg1"); st.State.Running == nil || st.ContainerID != "containerd://e1" {
		t.Errorf("dbg1: %+v", st)
	}
	if st := statusOf(t, s.EphemeralContainerStatuses, "dbg2"); st.State.Terminated == nil || st.State.Terminated.ExitCode != 1 {
		t.Errorf("dbg2 must stay terminated: %+v", st.State)
	}
	if st := statusOf(t, s.EphemeralContainerStatuses, "dbg3"); st.State.Waiting == nil {
		t.Errorf("dbg3 must wait: %+v", st.State)
	}
	if s.Phase != v1.PodRunning || condition(t, s, v1.ContainersReady).Status != v1.ConditionTrue {
		t.Errorf("ephemeral containers changed the pod: phase %s, %+v", s.Phase, s.Conditions)
	}
}

// The status and every condition the kubelet owns carry the generation of
// the spec they reflect (PodObservedGenerationTracking).
func TestGenerateObservedGeneration(t *testing.T) {
	pod := newPod(v1.RestartPolicyAlways, nil, "app")
	pod.Generation = 3
	s := Generate(input(pod, runtimeOf([]container.SandboxStatus{readySandbox("10.88.0.5")},
		ctr("app", "a1", container.StateRunning, 1, 0))))
	if s.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, want 3", s.ObservedGeneration)
	}
	for _, c := range s.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %s: observedGeneration = %d, want 3", c.Type, c.ObservedGeneration)
		}
	}
}
