package lifecycle

import (
	v1 "k8s.io/api/core/v1"
)

// NodeFeatures are what the node's runtime can do for a pod, read from its
// CRI status when berth starts.
type NodeFeatures struct {
	// UserNamespaces tells whether pods can have user namespaces of their
	// own (spec.hostUsers: false); UserNamespacesWhy says why not.
	UserNamespaces    bool
	UserNamespacesWhy string
	// SupplementalGroupsPolicy tells whether the runtime honours
	// supplementalGroupsPolicy: Strict (containerd 2.0 and later); an
	// older runtime would silently merge the image's groups in.
	SupplementalGroupsPolicy bool
	// Runtime is the runtime's name and version, which say whether it
	// mounts image volumes.
	Runtime RuntimeInfo
}

// unsupportedUserNamespace refuses a pod of hostUsers: false on a node
// whose runtime cannot give it a user namespace. The kubelet admits such a
// pod and fails its every sandbox (GetOrCreateUserNamespaceMappings);
// berth refuses it once, here, with the kubelet's message, so that it is
// Failed with the reason instead of retried for ever.
func unsupportedUserNamespace(pod *v1.Pod, node NodeFeatures) (Result, bool) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers || node.UserNamespaces {
		return Result{}, false
	}
	msg := "spec.hostUsers: can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	if node.UserNamespacesWhy != "" {
		msg += ": " + node.UserNamespacesWhy
	}
	return Result{Reason: reasonUnsupportedPodField, Message: msg}, true
}

// The kubelet's refusal of a Strict supplementalGroupsPolicy on a runtime
// without it (lifecycle.SupplementalGroupsPolicyNotSupported).
const (
	reasonSupplementalGroupsPolicyNotSupported  = "SupplementalGroupsPolicyNotSupported"
	messageSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicy=Strict is not supported in this node"
)

// unsupportedSupplementalGroupsPolicy is the kubelet's
// rejectPodAdmissionBasedOnSupplementalGroupsPolicy (the feature is GA):
// Merge, the default, runs anywhere; Strict only where the runtime says it
// honours it.
func unsupportedSupplementalGroupsPolicy(pod *v1.Pod, node NodeFeatures) (Result, bool) {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict || node.SupplementalGroupsPolicy {
		return Result{}, false
	}
	return Result{Reason: reasonSupplementalGroupsPolicyNotSupported, Message: messageSupplementalGroupsPolicyNotSupported}, true
}
