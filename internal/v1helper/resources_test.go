package v1helper

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestResourceNames(t *testing.T) {
	for _, tc := range []struct {
		name                      v1.ResourceName
		native, extended, hugePgs bool
		draExtended               bool
	}{
		{name: "cpu", native: true},
		{name: "memory", native: true},
		{name: "hugepages-2Mi", native: true, hugePgs: true},
		{name: "kubernetes.io/foo", native: true},
		{name: "example.com/widget", extended: true, draExtended: true},
		{name: "nvidia.com/gpu", extended: true, draExtended: true},
		{name: "deviceclass.resource.kubernetes.io/gpu-class", native: true, draExtended: true},
		{name: "requests.example.com/widget"},
		{name: "example.com/bad name"},
		{name: "example.com/"},
		{name: "/widget"},
	} {
		if got := IsNativeResource(tc.name); got != tc.native {
			t.Errorf("IsNativeResource(%q) = %v, want %v", tc.name, got, tc.native)
		}
		if got := IsExtendedResourceName(tc.name); got != tc.extended {
			t.Errorf("IsExtendedResourceName(%q) = %v, want %v", tc.name, got, tc.extended)
		}
		if got := IsDRAExtendedResourceName(tc.name); got != tc.draExtended {
			t.Errorf("IsDRAExtendedResourceName(%q) = %v, want %v", tc.name, got, tc.draExtended)
		}
		if got := IsHugePages(tc.name); got != tc.hugePgs {
			t.Errorf("IsHugePages(%q) = %v, want %v", tc.name, got, tc.hugePgs)
		}
	}
}

// BackedByDRA holds for a DRA extended resource the scheduler mapped to
// the container in the pod's extended resource claim, and only then.
func TestBackedByDRA(t *testing.T) {
	pod := &v1.Pod{Status: v1.PodStatus{ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "pod-extended-resources-abc",
		RequestMappings: []v1.ContainerExtendedResourceRequest{
			{ContainerName: "app", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"},
			{ContainerName: "app", ResourceName: "deviceclass.resource.kubernetes.io/gpu", RequestName: "container-0-request-1"},
			{ContainerName: "app", ResourceName: "cpu", RequestName: "container-0-request-2"},
		},
	}}}
	for _, tc := range []struct {
		container string
		name      v1.ResourceName
		want      bool
	}{
		{"app", "example.com/gpu", true},
		{"app", "deviceclass.resource.kubernetes.io/gpu", true},
		{"sidecar", "example.com/gpu", false},
		{"app", "example.com/nic", false},
		{"app", "cpu", false}, // not a DRA extended resource, whatever a mapping says
	} {
		if got := BackedByDRA(pod, tc.container, tc.name); got != tc.want {
			t.Errorf("BackedByDRA(%s, %s) = %v, want %v", tc.container, tc.name, got, tc.want)
		}
	}
	if BackedByDRA(&v1.Pod{}, "app", "example.com/gpu") {
		t.Error("a pod without an extended resource claim is backed by DRA")
	}
}
