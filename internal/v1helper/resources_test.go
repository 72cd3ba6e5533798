package v1helper

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestResourceNames(t *testing.T) {
	for _, tc := range []struct {
		name                      v1.ResourceName
		native, extended, hugePgs bool
	}{
		{name: "cpu", native: true},
		{name: "memory", native: true},
		{name: "hugepages-2Mi", native: true, hugePgs: true},
		{name: "kubernetes.io/foo", native: true},
		{name: "example.com/widget", extended: true},
		{name: "nvidia.com/gpu", extended: true},
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
		if got := IsHugePages(tc.name); got != tc.hugePgs {
			t.Errorf("IsHugePages(%q) = %v, want %v", tc.name, got, tc.hugePgs)
		}
	}
}
