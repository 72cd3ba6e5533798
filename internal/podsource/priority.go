package podsource

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The priority classes every cluster has without creating them (the values
// of k8s.io/kubernetes pkg/apis/scheduling). Any other class is an API
// object, which a standalone node cannot read.
const (
	SystemClusterCritical  = "system-cluster-critical"
	SystemNodeCritical     = "system-node-critical"
	SystemCriticalPriority = int32(2_000_000_000)
)

// builtinPriority is the priority the Priority admission plugin gives a
// class that needs no API object; "" is the class of a pod that names none.
func builtinPriority(class string) (int32, bool) {
	switch class {
	case "":
		return 0, true
	case SystemClusterCritical:
		return SystemCriticalPriority, true
	case SystemNodeCritical:
		return SystemCriticalPriority + 1000, true
	}
	return 0, false
}

func setPriorityDefaults(spec *v1.PodSpec) {
	if spec.Priority == nil {
		if p, ok := builtinPriority(spec.PriorityClassName); ok {
			spec.Priority = ptr.To(p)
		}
	}
	if spec.PreemptionPolicy == nil {
		spec.PreemptionPolicy = ptr.To(v1.PreemptLowerPriority)
	}
}

func validatePriority(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	want, ok := builtinPriority(spec.PriorityClassName)
	switch {
	case !ok:
		errs = append(errs, field.Forbidden(fldPath.Child("priorityClassName"), fmt.Sprintf(
			"priority class %q needs an API server; berth runs standalone and knows only %q and %q",
			spec.PriorityClassName, SystemNodeCritical, SystemClusterCritical)))
	case spec.Priority != nil && *spec.Priority != want:
		errs = append(errs, field.Forbidden(fldPath.Child("priority"), fmt.Sprintf(
			"the integer value of priority (%d) must not be provided in pod spec; the priority class %q gives %d",
			*spec.Priority, spec.PriorityClassName, want)))
	}
	if p := spec.PreemptionPolicy; p != nil && *p != v1.PreemptLowerPriority && *p != v1.PreemptNever {
		errs = append(errs, field.NotSupported(fldPath.Child("preemptionPolicy"), *p,
			[]v1.PreemptionPolicy{v1.PreemptLowerPriority, v1.PreemptNever}))
	}
	return errs
}
