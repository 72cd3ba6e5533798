// Package restartpolicy decides whether a container that exited runs again:
// by its own restartPolicyRules and restartPolicy (KEP-5307,
// ContainerRestartRules, beta and on since 1.35) or else by the pod's
// restartPolicy, as the kubelet's podutil.ContainerShouldRestart does. The
// pod worker's plans, the pod phase, the status generator and the prober
// all ask it, so that they agree.
package restartpolicy

import v1 "k8s.io/api/core/v1"

// ShouldRestart reports whether container c of a pod with spec, having
// exited with exitCode, is to be started again. The first rule whose exit
// codes match decides; a rule with an action berth does not know
// (RestartAllContainers, alpha and off in the kubelet berth follows) falls
// through to the container's policy, as in the kubelet with its gate off.
// Without a container-level policy its rules are ignored (the API server
// refuses rules without one) and the pod's policy decides.
func ShouldRestart(spec *v1.PodSpec, c *v1.Container, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := MatchingRule(c, exitCode); ok && rule.Action == v1.ContainerRestartRuleActionRestart {
			return true
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	}
	return true // Always, also the default
}

// MatchingRule is the first of c's restartPolicyRules whose exit codes
// match exitCode (operator In: listed; NotIn: not listed). A rule without
// exit codes or with an unknown operator matches nothing.
func MatchingRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		listed := false
		for _, v := range rule.ExitCodes.Values {
			if v == exitCode {
				listed = true
				break
			}
		}
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if listed {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !listed {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// RestartsWhileRunning reports whether a running container killed by a
// failed liveness or startup probe is started again. There is no exit code
// for the rules to look at, so only the policies count: the container's own,
// else the pod's (computePodActions).
func RestartsWhileRunning(spec *v1.PodSpec, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// AlwaysRestarts reports whether c restarts whatever its exit code: its
// effective policy is Always (rules can only add restarts to it).
func AlwaysRestarts(spec *v1.PodSpec, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyAlways
	}
	return spec.RestartPolicy == v1.RestartPolicyAlways || spec.RestartPolicy == ""
}

// RunsOnce reports whether c, once it succeeded, is not started again in a
// new sandbox: its effective policy is OnFailure (computePodActions).
func RunsOnce(spec *v1.PodSpec, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return spec.RestartPolicy == v1.RestartPolicyOnFailure
}
