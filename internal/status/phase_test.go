package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func running(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func startedSidecar(name string, started bool) v1.ContainerStatus {
	s := running(name)
	s.Started = &started
	return s
}

func terminated(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
}

func waiting(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}}}
}

// crashLooping is waiting to restart after exiting with code.
func crashLooping(name string, code int32) v1.ContainerStatus {
	s := waiting(name)
	s.State.Waiting.Reason = "CrashLoopBackOff"
	s.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: code}
	return s
}

func specOf(policy v1.RestartPolicy, inits []string, apps ...string) *v1.PodSpec {
	s := &v1.PodSpec{RestartPolicy: policy}
	for _, n := range inits {
		s.InitContainers = append(s.InitContainers, v1.Container{Name: n})
	}
	for _, n := range apps {
		s.Containers = append(s.Containers, v1.Container{Name: n})
	}
	return s
}

func withSidecar(s *v1.PodSpec, name string) *v1.PodSpec {
	always := v1.ContainerRestartPolicyAlways
	s.InitContainers = append(s.InitContainers, v1.Container{Name: name, RestartPolicy: &always})
	return s
}

func TestGetPhase(t *testing.T) {
	const (
		always    = v1.RestartPolicyAlways
		onFailure = v1.RestartPolicyOnFailure
		never     = v1.RestartPolicyNever
	)
	tests := []struct {
		name        string
		spec        *v1.PodSpec
		statuses    []v1.ContainerStatus
		terminal    bool
		initialized bool
		want        v1.PodPhase
	}{
		{"no statuses yet", specOf(always, nil, "a"), nil, false, false, v1.PodPending},
		{"all waiting to be created", specOf(always, nil, "a", "b"), []v1.ContainerStatus{waiting("a"), waiting("b")}, false, false, v1.PodPending},
		{"one running one waiting", specOf(always, nil, "a", "b"), []v1.ContainerStatus{running("a"), waiting("b")}, false, false, v1.PodPending},
		{"all running", specOf(always, nil, "a", "b"), []v1.ContainerStatus{running("a"), running("b")}, false, false, v1.PodRunning},
		{"running and exited", specOf(never, nil, "a", "b"), []v1.ContainerStatus{running("a"), terminated("b", 1)}, false, false, v1.PodRunning},
		{"state unknown", specOf(always, nil, "a"), []v1.ContainerStatus{{Name: "a"}}, false, false, v1.PodPending},
		{"init running", specOf(always, []string{"i"}, "a"), []v1.ContainerStatus{running("i"), waiting("a")}, false, false, v1.PodPending},
		{"init not started", specOf(always, []string{"i"}, "a"), []v1.ContainerStatus{waiting("i"), waiting("a")}, false, false, v1.PodPending},
		{"init failed, Never", specOf(never, []string{"i"}, "a"), []v1.ContainerStatus{terminated("i", 2), waiting("a")}, false, false, v1.PodFailed},
		{"init failed, OnFailure retries", specOf(onFailure, []string{"i"}, "a"), []v1.ContainerStatus{terminated("i", 2), waiting("a")}, false, false, v1.PodPending},
		{"init crash-looping, Always", specOf(always, []string{"i"}, "a"), []v1.ContainerStatus{crashLooping("i", 1), waiting("a")}, false, false, v1.PodPending},
		{"init crash-looping, Never fails", specOf(never, []string{"i"}, "a"), []v1.ContainerStatus{crashLooping("i", 1), waiting("a")}, false, false, v1.PodFailed},
		{"init done, app running", specOf(never, []string{"i"}, "a"), []v1.ContainerStatus{terminated("i", 0), running("a")}, false, false, v1.PodRunning},
		{"Always, all exited 0: restarting", specOf(always, nil, "a", "b"), []v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, false, false, v1.PodRunning},
		{"Always, crash loop", specOf(always, nil, "a"), []v1.ContainerStatus{crashLooping("a", 1)}, false, false, v1.PodRunning},
		{"OnFailure, all exited 0", specOf(onFailure, nil, "a", "b"), []v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, false, false, v1.PodSucceeded},
		{"OnFailure, one failed: restarting", specOf(onFailure, nil, "a", "b"), []v1.ContainerStatus{terminated("a", 0), terminated("b", 3)}, false, false, v1.PodRunning},
		{"OnFailure, crash loop", specOf(onFailure, nil, "a"), []v1.ContainerStatus{crashLooping("a", 3)}, false, false, v1.PodRunning},
		{"Never, all exited 0", specOf(never, nil, "a", "b"), []v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, false, false, v1.PodSucceeded},
		{"Never, one failed", specOf(never, nil, "a", "b"), []v1.ContainerStatus{terminated("a", 0), terminated("b", 1)}, false, false, v1.PodFailed},
		{"terminal, Always, all exited 0", specOf(always, nil, "a"), []v1.ContainerStatus{terminated("a", 0)}, true, false, v1.PodSucceeded},
		{"terminal, Always, one failed", specOf(always, nil, "a", "b"), []v1.ContainerStatus{terminated("a", 0), terminated("b", 137)}, true, false, v1.PodFailed},
		{"terminal, OnFailure, one failed", specOf(onFailure, nil, "a"), []v1.ContainerStatus{terminated("a", 1)}, true, false, v1.PodFailed},
		{"sidecar not started, not initialized", withSidecar(specOf(always, nil, "a"), "s"), []v1.ContainerStatus{startedSidecar("s", false), waiting("a")}, false, false, v1.PodPending},
		{"sidecar restarting after init", withSidecar(specOf(always, nil, "a"), "s"), []v1.ContainerStatus{startedSidecar("s", false), running("a")}, false, true, v1.PodRunning},
		{"sidecar started, app running", withSidecar(specOf(always, nil, "a"), "s"), []v1.ContainerStatus{startedSidecar("s", true), running("a")}, false, false, v1.PodRunning},
		{"sidecar waiting first start", withSidecar(specOf(always, nil, "a"), "s"), []v1.ContainerStatus{waiting("s"), waiting("a")}, false, false, v1.PodPending},
		{"sidecar stopped, Never, app done", withSidecar(specOf(never, nil, "a"), "s"), []v1.ContainerStatus{terminated("s", 143), terminated("a", 0)}, false, false, v1.PodSucceeded},
		{"sidecar running, Never, app done", withSidecar(specOf(never, nil, "a"), "s"), []v1.ContainerStatus{startedSidecar("s", true), terminated("a", 0)}, false, true, v1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := getPhase(tt.spec, tt.statuses, tt.terminal, tt.initialized); got != tt.want {
				t.Errorf("getPhase = %s, want %s", got, tt.want)
			}
		})
	}
}
