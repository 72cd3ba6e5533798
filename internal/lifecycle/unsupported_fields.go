package lifecycle

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// unsupportedField finds the first pod field berth's sandbox and container
// configs would drop or fail on at every start, and says why. Each is
// refused because honouring it needs something berth does not have
// (a runtime that takes a stop signal) or does not implement; fields berth passes to the
// runtime, or that the kubelet itself ignores on Linux (windowsOptions,
// seLinuxChangePolicy without SELinux), are not listed.
func unsupportedField(pod *v1.Pod) (path, why string, found bool) {
	spec := field.NewPath("spec")
	for _, list := range []struct {
		name       string
		containers []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i := range list.containers {
			if p, why, ok := unsupportedContainerField(&list.containers[i], spec.Child(list.name).Index(i)); ok {
				return p, why, true
			}
		}
	}
	return "", "", false
}

// unsupportedContainerField is unsupportedField for one container.
func unsupportedContainerField(c *v1.Container, fldPath *field.Path) (path, why string, found bool) {
	switch {
	case c.Lifecycle != nil && c.Lifecycle.StopSignal != nil:
		return fldPath.Child("lifecycle", "stopSignal").String(),
			"is not supported by berth: the container would be stopped with its image's signal", true
	}
	for i, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FileKeyRef != nil {
			return fldPath.Child("env").Index(i).Child("valueFrom", "fileKeyRef").String(),
				"is not supported by berth: the container could never be created", true
		}
	}
	return "", "", false
}
