// Package v1helper answers questions about core/v1 resource names, as the
// Kubernetes package of the same name (pkg/apis/core/v1/helper) does; it is
// not published as a module, so berth keeps its own copy of the rules.
package v1helper

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// IsHugePages reports a hugepages-<size> resource.
func IsHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// IsNativeResource reports a resource without a domain, or in kubernetes.io.
func IsNativeResource(name v1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), v1.ResourceDefaultNamespacePrefix)
}

// IsExtendedResourceName reports a resource a device plugin may advertise,
// e.g. "example.com/gpu": domain-prefixed, outside kubernetes.io, and valid
// once the quota prefix "requests." is put in front of it.
func IsExtendedResourceName(name v1.ResourceName) bool {
	if IsNativeResource(name) || strings.HasPrefix(string(name), v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(content.IsLabelKey(v1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// IsDRAExtendedResourceName reports a resource the scheduler may serve
// from a DRA driver (KEP-5004): an extended resource a DeviceClass names in
// spec.extendedResourceName, or a class's implicit one,
// deviceclass.resource.kubernetes.io/<class> (the scheduler's
// IsDRAExtendedResourceName).
func IsDRAExtendedResourceName(name v1.ResourceName) bool {
	return IsExtendedResourceName(name) || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)
}

// BackedByDRA reports whether the scheduler allocated the container's
// request of name through the pod's extended resource claim
// (status.extendedResourceClaimStatus): a DRA driver serves it, neither a
// device plugin nor the node's allocatable.
func BackedByDRA(pod *v1.Pod, container string, name v1.ResourceName) bool {
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil || !IsDRAExtendedResourceName(name) {
		return false
	}
	for _, m := range st.RequestMappings {
		if m.ContainerName == container && v1.ResourceName(m.ResourceName) == name {
			return true
		}
	}
	return false
}
