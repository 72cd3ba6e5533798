package restartpolicy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func rule(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

func TestShouldRestart(t *testing.T) {
	never, onFailure, always := ptr.To(v1.ContainerRestartPolicyNever), ptr.To(v1.ContainerRestartPolicyOnFailure), ptr.To(v1.ContainerRestartPolicyAlways)
	in42 := rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42, 43)
	notIn0 := rule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)
	for _, tc := range []struct {
		name     string
		pod      v1.RestartPolicy
		policy   *v1.ContainerRestartPolicy
		rules    []v1.ContainerRestartRule
		exitCode int32
		want     bool
	}{
		{"pod Always, exit 0", v1.RestartPolicyAlways, nil, nil, 0, true},
		{"pod default is Always", "", nil, nil, 0, true},
		{"pod OnFailure, exit 0", v1.RestartPolicyOnFailure, nil, nil, 0, false},
		{"pod OnFailure, exit 1", v1.RestartPolicyOnFailure, nil, nil, 1, true},
		{"pod Never, exit 1", v1.RestartPolicyNever, nil, nil, 1, false},
		{"container Never overrides pod Always", v1.RestartPolicyAlways, never, nil, 1, false},
		{"container Always overrides pod Never", v1.RestartPolicyNever, always, nil, 0, true},
		{"container OnFailure, exit 0", v1.RestartPolicyAlways, onFailure, nil, 0, false},
		{"container OnFailure, exit 2", v1.RestartPolicyNever, onFailure, nil, 2, true},
		{"rule In matches", v1.RestartPolicyNever, never, []v1.ContainerRestartRule{in42}, 42, true},
		{"rule In matches another listed code", v1.RestartPolicyNever, never, []v1.ContainerRestartRule{in42}, 43, true},
		{"rule In does not match: container policy", v1.RestartPolicyAlways, never, []v1.ContainerRestartRule{in42}, 1, false},
		{"rule In does not match exit 0 under OnFailure", v1.RestartPolicyNever, onFailure, []v1.ContainerRestartRule{in42}, 0, false},
		{"rule NotIn matches a failure", v1.RestartPolicyNever, never, []v1.ContainerRestartRule{notIn0}, 7, true},
		{"rule NotIn does not match a listed code", v1.RestartPolicyNever, never, []v1.ContainerRestartRule{notIn0}, 0, false},
		{"second rule matches", v1.RestartPolicyNever, never, []v1.ContainerRestartRule{in42, rule(v1.ContainerRestartRuleOnExitCodesOpIn, 9)}, 9, true},
		{"rule without exit codes matches nothing", v1.RestartPolicyNever, never, []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}, 1, false},
		{"unknown operator matches nothing", v1.RestartPolicyNever, never, []v1.ContainerRestartRule{rule("Between", 1)}, 1, false},
		{"unknown action falls through to the policy", v1.RestartPolicyAlways, never,
			[]v1.ContainerRestartRule{{Action: "RestartAllContainers", ExitCodes: in42.ExitCodes}}, 42, false},
		{"rules without a container policy are ignored", v1.RestartPolicyNever, nil, []v1.ContainerRestartRule{in42}, 42, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1.PodSpec{RestartPolicy: tc.pod}
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			if got := ShouldRestart(spec, c, tc.exitCode); got != tc.want {
				t.Errorf("ShouldRestart(exit %d) = %v, want %v", tc.exitCode, got, tc.want)
			}
		})
	}
}

func TestPolicyQuestions(t *testing.T) {
	never, onFailure, always := ptr.To(v1.ContainerRestartPolicyNever), ptr.To(v1.ContainerRestartPolicyOnFailure), ptr.To(v1.ContainerRestartPolicyAlways)
	in1 := []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleOnExitCodesOpIn, 1)}
	for _, tc := range []struct {
		name                          string
		pod                           v1.RestartPolicy
		policy                        *v1.ContainerRestartPolicy
		rules                         []v1.ContainerRestartRule
		whileRunning, always, runOnce bool
	}{
		{"pod Always", v1.RestartPolicyAlways, nil, nil, true, true, false},
		{"pod OnFailure", v1.RestartPolicyOnFailure, nil, nil, true, false, true},
		{"pod Never", v1.RestartPolicyNever, nil, nil, false, false, false},
		{"container Never in pod Always", v1.RestartPolicyAlways, never, nil, false, false, false},
		{"container Never with a Restart rule", v1.RestartPolicyAlways, never, in1, false, false, false},
		{"container OnFailure in pod Never", v1.RestartPolicyNever, onFailure, nil, true, false, true},
		{"container Always in pod Never", v1.RestartPolicyNever, always, nil, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1.PodSpec{RestartPolicy: tc.pod}
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			got := [3]bool{RestartsWhileRunning(spec, c), AlwaysRestarts(spec, c), RunsOnce(spec, c)}
			if want := [3]bool{tc.whileRunning, tc.always, tc.runOnce}; got != want {
				t.Errorf("RestartsWhileRunning, AlwaysRestarts, RunsOnce = %v, want %v", got, want)
			}
		})
	}
}
