package nodestatus

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeFeatures are what the Node says of its runtime: the kubelet's
// RuntimeHandlers and NodeFeatures setters over the CRI status.
type RuntimeFeatures struct {
	// Handlers is status.runtimeHandlers: each handler the runtime lists,
	// with whether it does recursive read-only mounts and user namespaces.
	// The scheduler and users read it to know where hostUsers: false and
	// recursiveReadOnly: Enabled can run.
	Handlers []v1.NodeRuntimeHandler
	// Features is status.features: whether the runtime honours
	// supplementalGroupsPolicy; nil where the runtime reports no features
	// (containerd 1.x), as the kubelet leaves it.
	Features *v1.NodeFeatures
}

// RuntimeFeaturesOf reads a runtime's CRI status as the kubelet does
// (kuberuntime toKubeRuntimeStatus, then the node status setters).
func RuntimeFeaturesOf(resp *runtimeapi.StatusResponse) RuntimeFeatures {
	var f RuntimeFeatures
	hs := resp.GetRuntimeHandlers()
	f.Handlers = make([]v1.NodeRuntimeHandler, len(hs))
	for i, h := range hs {
		rro, userns := h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces()
		f.Handlers[i] = v1.NodeRuntimeHandler{
			Name:     h.GetName(),
			Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns},
		}
	}
	if rf := resp.GetFeatures(); rf != nil {
		sgp := rf.GetSupplementalGroupsPolicy()
		f.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: &sgp}
	}
	return f
}
