package lifecycle

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
)

func TestRuntimeInjectsCDIDevices(t *testing.T) {
	for _, tc := range []struct {
		rt   RuntimeInfo
		want bool
	}{
		{RuntimeInfo{"containerd", "v2.4.2"}, true},
		{RuntimeInfo{"containerd", "2.0.0"}, true},
		{RuntimeInfo{"containerd", "1.7.27"}, false}, // enable_cdi, unseen
		{RuntimeInfo{"containerd", "1.6.20~ds1"}, false},
		{RuntimeInfo{"cri-o", "1.30.1"}, true},
		{RuntimeInfo{"cri-o", "1.27.0"}, false},
		{RuntimeInfo{"somert", "9.0"}, false},
		{RuntimeInfo{"containerd", "garbage"}, false},
	} {
		if got := RuntimeInjectsCDIDevices(tc.rt); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.rt, got, tc.want)
		}
	}
}

// A pod that asks for a ResourceClaim is admitted only where claims are
// prepared; elsewhere it is refused naming the field and why.
func TestClaimsAdmission(t *testing.T) {
	podClaims := &v1.Pod{Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu"}},
		Containers: []v1.Container{{Name: "c"}}}}
	initClaims := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i",
		Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}}}}
	extended := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources"}}}
	on, _ := DynamicResources(true, RuntimeInfo{"containerd", "v2.4.2"})
	_, standalone := DynamicResources(false, RuntimeInfo{"containerd", "v2.4.2"})
	_, old := DynamicResources(true, RuntimeInfo{"containerd", "1.6.20~ds1"})
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		node     NodeFeatures
		wantText string // "" admits
	}{
		{"claims where prepared", podClaims, NodeFeatures{DynamicResources: on}, ""},
		{"no claims standalone", &v1.Pod{}, NodeFeatures{DynamicResourcesWhy: standalone}, ""},
		{"claims standalone", podClaims, NodeFeatures{DynamicResourcesWhy: standalone},
			"spec.resourceClaims: dynamic resource allocation needs an API server"},
		{"claims on containerd 1.6", podClaims, NodeFeatures{DynamicResourcesWhy: old},
			"spec.resourceClaims: dynamic resource allocation needs a container runtime that injects CDI devices (containerd 2.0 or later, CRI-O 1.28 or later); this node runs containerd 1.6.20~ds1"},
		{"init container's claim", initClaims, NodeFeatures{DynamicResourcesWhy: standalone},
			"spec.initContainers[0].resources.claims: dynamic resource allocation needs an API server"},
		{"extended resources DRA serves on containerd 1.6", extended, NodeFeatures{DynamicResourcesWhy: old},
			"status.extendedResourceClaimStatus: dynamic resource allocation needs a container runtime that injects CDI devices"},
		{"extended resources DRA serves where prepared", extended, NodeFeatures{DynamicResources: on}, ""},
	} {
		r := PodFeaturesAdmitHandler(tc.node).Admit(&PodAdmitAttributes{Pod: admission.NewPodInfo(tc.pod)})
		if tc.wantText == "" {
			if !r.Admit {
				t.Errorf("%s: refused: %+v", tc.name, r)
			}
			continue
		}
		if r.Admit || r.Reason != reasonUnsupportedPodField || !strings.Contains(r.Message, tc.wantText) {
			t.Errorf("%s: %+v, want %s containing %q", tc.name, r, reasonUnsupportedPodField, tc.wantText)
		}
	}
}
