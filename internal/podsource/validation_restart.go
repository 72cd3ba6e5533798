package podsource

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The API server's limits on a container's restart rules.
const (
	maxRestartRules     = 20
	maxRestartExitCodes = 255
)

// validateContainerRestartPolicy checks a container's own restartPolicy and
// restartPolicyRules (ContainerRestartRules, on since 1.35) as the API
// server's validateContainerRestartPolicy does: rules need a policy, the
// only action is Restart, and each rule names its exit codes.
func validateContainerRestartPolicy(c *v1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.RestartPolicy == nil && len(c.RestartPolicyRules) > 0:
		errs = append(errs, field.Required(fldPath.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
	case c.RestartPolicy != nil:
		errs = append(errs, oneOfEnum(*c.RestartPolicy, fldPath.Child("restartPolicy"),
			v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure)...)
	}
	rulesPath := fldPath.Child("restartPolicyRules")
	if len(c.RestartPolicyRules) > maxRestartRules {
		errs = append(errs, field.TooMany(rulesPath, len(c.RestartPolicyRules), maxRestartRules))
	}
	for i, rule := range c.RestartPolicyRules {
		p := rulesPath.Index(i)
		if rule.Action != v1.ContainerRestartRuleActionRestart {
			errs = append(errs, field.NotSupported(p.Child("action"), rule.Action,
				[]v1.ContainerRestartRuleAction{v1.ContainerRestartRuleActionRestart}))
		}
		if rule.ExitCodes == nil {
			errs = append(errs, field.Required(p.Child("exitCodes"), "must be specified"))
			continue
		}
		op := rule.ExitCodes.Operator
		if op != v1.ContainerRestartRuleOnExitCodesOpIn && op != v1.ContainerRestartRuleOnExitCodesOpNotIn {
			errs = append(errs, field.NotSupported(p.Child("exitCodes", "operator"), op,
				[]v1.ContainerRestartRuleOnExitCodesOperator{v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn}))
		}
		if n := len(rule.ExitCodes.Values); n > maxRestartExitCodes {
			errs = append(errs, field.TooMany(p.Child("exitCodes", "values"), n, maxRestartExitCodes))
		}
	}
	return errs
}

// validateInitContainerRestartPolicy is validateContainerRestartPolicy for
// an init container: a sidecar (Always) may have no rules; a regular init
// container may restart by its own policy and rules.
func validateInitContainerRestartPolicy(c *v1.Container, fldPath *field.Path) field.ErrorList {
	if isSidecar(c) {
		if len(c.RestartPolicyRules) > 0 {
			return field.ErrorList{field.Forbidden(fldPath.Child("restartPolicyRules"),
				"restartPolicyRules are not allowed for init containers with restart policy Always")}
		}
		return nil
	}
	return validateContainerRestartPolicy(c, fldPath)
}
