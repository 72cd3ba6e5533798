package admission

import (
	"fmt"
	goruntime "runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The kubelet's reasons for the checks its predicate admit handler runs
// before any other (pkg/kubelet/lifecycle/predicate.go), with its messages
// word for word: tools and people match on them.
const (
	ReasonPodOSSelectorNodeLabelDoesNotMatch   = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonPodOSNotSupported                    = "PodOSNotSupported"
	ReasonSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicyNotSupported"

	messagePodOSSelector = "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	messagePodOS         = "Failed to admit pod as the OS field doesn't match node OS"
)

// noPreemptionEarly explains why a pod refused by an early check preempts
// nothing, critical or not.
const noPreemptionEarly = "it was refused before its resources were counted, for a reason preempting pods cannot cure"

// EarlyRejection is the decision of the checks the kubelet runs before any
// other, on this node's OS, for a pod they refuse: Admit starts with it, and
// a caller with checks of its own (berth's unsupported fields) runs it
// first, so that a pod for another OS is refused for its OS whatever else
// it asks for.
func EarlyRejection(pod *v1.Pod, node *v1.Node) (Result, bool) {
	r, bad := earlyRejection(pod, node, goruntime.GOOS)
	if bad {
		r.NoPreemption = noPreemptionEarly
	}
	return r, bad
}

// earlyRejection runs the checks that the kubelet's predicate admit handler
// runs first, "that preemption will not help": the pod's kubernetes.io/os
// label, its spec.os, and its supplementalGroupsPolicy. nodeOS is the OS the
// node runs pods of (runtime.GOOS). It reports false when the pod passes.
func earlyRejection(pod *v1.Pod, node *v1.Node, nodeOS string) (Result, bool) {
	switch {
	case podOSLabelMismatch(pod, nodeOS):
		return Result{Reason: ReasonPodOSSelectorNodeLabelDoesNotMatch, Message: messagePodOSSelector}, true
	case pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS:
		// rejectPodAdmissionBasedOnOSField: any OS but the node's, even
		// one the API server has no name for.
		return Result{Reason: ReasonPodOSNotSupported, Message: messagePodOS}, true
	case strictGroupsUnsupported(pod, node):
		return Result{Reason: ReasonSupplementalGroupsPolicyNotSupported,
			Message: fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)}, true
	}
	return Result{}, false
}

// podOSLabelMismatch is the kubelet's rejectPodAdmissionBasedOnOSSelector.
// It reads the pod's own labels, not its nodeSelector (a kubernetes.io/os
// nodeSelector is the NodeAffinity predicate's), and compares the label
// with the node's OS: the kubelet takes the node's kubernetes.io/os label
// when it is present and right, and the OS it runs on otherwise, so the
// node's OS is what counts either way.
func podOSLabelMismatch(pod *v1.Pod, nodeOS string) bool {
	want, ok := pod.Labels[v1.LabelOSStable]
	return ok && want != nodeOS
}

// strictGroupsUnsupported is the kubelet's
// rejectPodAdmissionBasedOnSupplementalGroupsPolicy with the feature past
// beta, as it is in v1.36: a pod that asks for Strict is refused unless the
// node reports the runtime supports it (status.features). A runtime that
// does not would silently merge the image's groups back in.
func strictGroupsUnsupported(pod *v1.Pod, node *v1.Node) bool {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict {
		return false
	}
	var supported *bool
	if node != nil && node.Status.Features != nil {
		supported = node.Status.Features.SupplementalGroupsPolicy
	}
	return !ptr.Deref(supported, false)
}
