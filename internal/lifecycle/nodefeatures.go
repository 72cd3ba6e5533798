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
	// Runtime is the runtime's name and version, which say whether it
	// mounts image volumes.
	Runtime RuntimeInfo
	// DynamicResources tells whether the node prepares ResourceClaims
	// (see DynamicResources); DynamicResourcesWhy says why not.
	DynamicResources    bool
	DynamicResourcesWhy string
	// CSIVolumes tells whether the node sets up persistentVolumeClaim,
	// ephemeral and csi volumes through CSI drivers (a cluster node);
	// CSIVolumesWhy says why not.
	CSIVolumes    bool
	CSIVolumesWhy string
}

// unsupportedClaims refuses a pod that asks for ResourceClaims on a node
// that cannot prepare them: started without them, its containers would
// run without the devices they were allocated.
func unsupportedClaims(pod *v1.Pod, node NodeFeatures) (Result, bool) {
	path, ok := claimsField(pod)
	if !ok || node.DynamicResources {
		return Result{}, false
	}
	why := node.DynamicResourcesWhy
	if why == "" {
		why = "dynamic resource allocation is not available on this node"
	}
	return Result{Reason: reasonUnsupportedPodField, Message: path + ": " + why}, true
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
