package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// withOwnPolicy gives container name of spec its own restart policy and,
// with codes, one rule restarting it on those exit codes.
func withOwnPolicy(s *v1.PodSpec, name string, policy v1.ContainerRestartPolicy, codes ...int32) *v1.PodSpec {
	for _, list := range [][]v1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			if list[i].Name != name {
				continue
			}
			list[i].RestartPolicy = ptr.To(policy)
			if len(codes) > 0 {
				list[i].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
					ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
			}
		}
	}
	return s
}

// TestGetPhaseContainerRestartRules: with ContainerRestartRules each
// container's own decision says whether it is restarting (the kubelet's
// getPhase with the gate on).
func TestGetPhaseContainerRestartRules(t *testing.T) {
	const (
		always = v1.RestartPolicyAlways
		never  = v1.RestartPolicyNever
	)
	for _, tt := range []struct {
		name     string
		spec     *v1.PodSpec
		statuses []v1.ContainerStatus
		terminal bool
		want     v1.PodPhase
	}{
		{"pod Never, rule matches: restarting", withOwnPolicy(specOf(never, nil, "a"), "a", "Never", 42),
			[]v1.ContainerStatus{terminated("a", 42)}, false, v1.PodRunning},
		{"pod Never, rule matches, waiting in back-off", withOwnPolicy(specOf(never, nil, "a"), "a", "Never", 42),
			[]v1.ContainerStatus{crashLooping("a", 42)}, false, v1.PodRunning},
		{"pod Never, rule does not match: failed", withOwnPolicy(specOf(never, nil, "a"), "a", "Never", 42),
			[]v1.ContainerStatus{terminated("a", 1)}, false, v1.PodFailed},
		{"pod Always, container Never exited 0: succeeded", withOwnPolicy(specOf(always, nil, "a"), "a", "Never"),
			[]v1.ContainerStatus{terminated("a", 0)}, false, v1.PodSucceeded},
		{"pod Always, container Never failed: failed", withOwnPolicy(specOf(always, nil, "a"), "a", "Never"),
			[]v1.ContainerStatus{terminated("a", 3)}, false, v1.PodFailed},
		{"pod Always, one container Never, the other restarts", withOwnPolicy(specOf(always, nil, "a", "b"), "a", "Never"),
			[]v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, false, v1.PodRunning},
		{"pod Never, container OnFailure failed: restarting", withOwnPolicy(specOf(never, nil, "a"), "a", "OnFailure"),
			[]v1.ContainerStatus{terminated("a", 1)}, false, v1.PodRunning},
		{"pod Never, container Always: restarting", withOwnPolicy(specOf(never, nil, "a"), "a", "Always"),
			[]v1.ContainerStatus{terminated("a", 0)}, false, v1.PodRunning},
		{"terminal pod: rules no longer matter", withOwnPolicy(specOf(never, nil, "a"), "a", "Never", 42),
			[]v1.ContainerStatus{terminated("a", 42)}, true, v1.PodFailed},
		{"pod Never, init rule matches: pending", withOwnPolicy(specOf(never, []string{"i"}, "a"), "i", "Never", 7),
			[]v1.ContainerStatus{terminated("i", 7), waiting("a")}, false, v1.PodPending},
		{"pod Never, init rule does not match: failed", withOwnPolicy(specOf(never, []string{"i"}, "a"), "i", "Never", 7),
			[]v1.ContainerStatus{crashLooping("i", 8), waiting("a")}, false, v1.PodFailed},
		{"pod Always, init Never failed: failed", withOwnPolicy(specOf(always, []string{"i"}, "a"), "i", "Never"),
			[]v1.ContainerStatus{terminated("i", 1), waiting("a")}, false, v1.PodFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := getPhase(tt.spec, tt.statuses, tt.terminal, false); got != tt.want {
				t.Errorf("getPhase = %s, want %s", got, tt.want)
			}
		})
	}
}
