package podworker

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/container"
)

// withOwnRestart gives the named container (init or app) its own restart
// policy and, with codes, a rule restarting it on those exit codes.
func withOwnRestart(pod *v1.Pod, name string, policy v1.ContainerRestartPolicy, codes ...int32) *v1.Pod {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name != name {
				continue
			}
			list[i].RestartPolicy = &policy
			if len(codes) > 0 {
				list[i].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
					ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
			}
		}
	}
	return pod
}

// TestComputePlanContainerRestartRules: a container's own restart policy
// and rules, not the pod's policy, decide its restarts (ContainerRestartRules).
func TestComputePlanContainerRestartRules(t *testing.T) {
	running, exited := container.StateRunning, container.StateExited
	for _, tt := range []struct {
		name   string
		pod    *v1.Pod
		ctrs   []ctr
		failed map[string]string
		want   Plan
	}{
		{
			name: "pod Never, the listed exit code restarts it",
			pod:  withOwnRestart(testPod(v1.RestartPolicyNever, nil, "a"), "a", "Never", 42),
			ctrs: []ctr{{"a", exited, 42}},
			want: Plan{SandboxID: "sb1", Start: []int{0}},
		},
		{
			name: "pod Never, another exit code: the pod is done",
			pod:  withOwnRestart(testPod(v1.RestartPolicyNever, nil, "a"), "a", "Never", 42),
			ctrs: []ctr{{"a", exited, 1}},
			want: Plan{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "pod Always, container Never that exited stays down while the other runs",
			pod:  withOwnRestart(testPod(v1.RestartPolicyAlways, nil, "a", "b"), "a", "Never"),
			ctrs: []ctr{{"a", exited, 0}, {"b", running, 0}},
			want: Plan{SandboxID: "sb1"},
		},
		{
			name: "pod Always, every container Never and exited: the pod is done",
			pod:  withOwnRestart(withOwnRestart(testPod(v1.RestartPolicyAlways, nil, "a", "b"), "a", "Never"), "b", "Never"),
			ctrs: []ctr{{"a", exited, 0}, {"b", exited, 1}},
			want: Plan{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "pod Always, container OnFailure succeeded, the other restarts",
			pod:  withOwnRestart(testPod(v1.RestartPolicyAlways, nil, "a", "b"), "a", "OnFailure"),
			ctrs: []ctr{{"a", exited, 0}, {"b", exited, 0}},
			want: Plan{SandboxID: "sb1", Start: []int{1}},
		},
		{
			name: "pod Never, container Always restarts after exit 0",
			pod:  withOwnRestart(testPod(v1.RestartPolicyNever, nil, "a"), "a", "Always"),
			ctrs: []ctr{{"a", exited, 0}},
			want: Plan{SandboxID: "sb1", Start: []int{0}},
		},
		{
			name:   "pod Always, container Never failed liveness: killed for good, nothing left",
			pod:    withOwnRestart(testPod(v1.RestartPolicyAlways, nil, "a"), "a", "Never", 1),
			ctrs:   []ctr{{"a", running, 0}},
			failed: map[string]string{"a-a": "liveness"},
			want:   Plan{KillPod: true, SandboxID: "sb1", Kill: []Kill{{ID: "a-a", Name: "a", Reason: "Container a failed liveness probe"}}},
		},
		{
			name:   "pod Never, container OnFailure failed liveness: restarted",
			pod:    withOwnRestart(testPod(v1.RestartPolicyNever, nil, "a"), "a", "OnFailure"),
			ctrs:   []ctr{{"a", running, 0}},
			failed: map[string]string{"a-a": "liveness"},
			want: Plan{SandboxID: "sb1", Start: []int{0},
				Kill: []Kill{{ID: "a-a", Name: "a", Reason: "Container a failed liveness probe, will be restarted"}}},
		},
		{
			name: "pod Never, failed init container restarts by its rule",
			pod:  withOwnRestart(testPod(v1.RestartPolicyNever, []string{"i"}, "a"), "i", "Never", 3),
			ctrs: []ctr{{"i", exited, 3}},
			want: Plan{SandboxID: "sb1", StartInit: []int{0}},
		},
		{
			name: "pod Always, failed init container with its own Never: the pod is dead",
			pod:  withOwnRestart(testPod(v1.RestartPolicyAlways, []string{"i"}, "a"), "i", "Never"),
			ctrs: []ctr{{"i", exited, 1}},
			want: Plan{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "new sandbox: a container OnFailure that succeeded is not started again",
			pod:  withOwnRestart(testPod(v1.RestartPolicyAlways, nil, "a", "b"), "a", "OnFailure"),
			ctrs: []ctr{{"a", exited, 0}, {"b", exited, 137}},
			want: Plan{KillPod: true, CreateSandbox: true, SandboxID: "sb1", SandboxAttempt: 1, Start: []int{1}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sandbox := "ready"
			if tt.want.CreateSandbox {
				sandbox = "dead"
			}
			got := ComputePlan(tt.pod, runtimeStatus(tt.pod, sandbox, tt.ctrs...), fakeProbes{failed: tt.failed})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ComputePlan:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}
