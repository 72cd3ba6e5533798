package lifecycle

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// cdiRuntimes is the first version of each runtime that injects the CDI
// devices of the CRI's ContainerConfig.CDIDevices without a setting:
// containerd enables CDI by default since 2.0 (1.7 had it behind
// enable_cdi, which berth cannot see on a runtime it does not manage),
// CRI-O since 1.28.
var cdiRuntimes = map[string]*version.Version{
	"containerd": version.MustParseGeneric("2.0.0"),
	"cri-o":      version.MustParseGeneric("1.28.0"),
}

// RuntimeInjectsCDIDevices tells whether rt gives a container the CDI
// devices a DRA driver returned. A runtime that does not ignores the CRI
// field, and the container would run without its devices.
func RuntimeInjectsCDIDevices(rt RuntimeInfo) bool {
	first, ok := cdiRuntimes[strings.ToLower(rt.Name)]
	if !ok {
		return false
	}
	v, err := version.ParseGeneric(strings.TrimSpace(rt.Version))
	return err == nil && v.AtLeast(first)
}

// DynamicResources says whether the node prepares ResourceClaims: it has
// an API server to read them from and a runtime that injects CDI devices.
// DynamicResourcesWhy says why not.
func DynamicResources(cluster bool, rt RuntimeInfo) (ok bool, why string) {
	switch {
	case !cluster:
		return false, "dynamic resource allocation needs an API server (cluster mode): ResourceClaims live there"
	case !RuntimeInjectsCDIDevices(rt):
		return false, fmt.Sprintf("dynamic resource allocation needs a container runtime that injects CDI devices (containerd 2.0 or later, CRI-O 1.28 or later); this node runs %s", rt)
	}
	return true, ""
}

// claimsField names the first field of pod that asks for a ResourceClaim.
func claimsField(pod *v1.Pod) (string, bool) {
	if len(pod.Spec.ResourceClaims) > 0 {
		return "spec.resourceClaims", true
	}
	if pod.Status.ExtendedResourceClaimStatus != nil {
		return "status.extendedResourceClaimStatus", true
	}
	for _, list := range []struct {
		name       string
		containers []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i := range list.containers {
			if len(list.containers[i].Resources.Claims) > 0 {
				return fmt.Sprintf("spec.%s[%d].resources.claims", list.name, i), true
			}
		}
	}
	return "", false
}
