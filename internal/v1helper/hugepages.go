package v1helper

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// IsHugePageMedium reports an emptyDir medium HugePages or HugePages-<size>.
func IsHugePageMedium(m v1.StorageMedium) bool {
	return m == v1.StorageMediumHugePages || strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix))
}

// HugePagesPageSize is the page size a huge page emptyDir of medium is
// mounted with, as the kubelet's emptyDir plugin chooses it
// (getPageSizeMountOption): HugePages-<size> takes <size>, which some
// container (or the pod, with pod-level resources) must request;
// HugePages takes the one size the pod requests, and is refused when it
// requests several or none. The requests stand for the limits, which API
// validation makes equal.
func HugePagesPageSize(spec *v1.PodSpec, medium v1.StorageMedium) (resource.Quantity, error) {
	var want *resource.Quantity
	if medium != v1.StorageMediumHugePages {
		s, ok := strings.CutPrefix(string(medium), string(v1.StorageMediumHugePagesPrefix))
		if !ok {
			return resource.Quantity{}, fmt.Errorf("medium %s is not a huge page medium", medium)
		}
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() <= 0 {
			return resource.Quantity{}, fmt.Errorf("medium %s: %q is not a page size", medium, s)
		}
		want = &q
	}
	var lists []v1.ResourceList
	if spec.Resources != nil {
		lists = append(lists, spec.Resources.Requests)
	}
	for _, cs := range [][]v1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			lists = append(lists, cs[i].Resources.Requests)
		}
	}
	var found *resource.Quantity
	for _, list := range lists {
		for name := range list {
			s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			size, err := resource.ParseQuantity(s)
			if err != nil {
				return resource.Quantity{}, fmt.Errorf("resource %s: %q is not a page size", name, s)
			}
			switch {
			case want != nil:
				if size.Cmp(*want) == 0 {
					found = want
				}
			case found != nil && found.Cmp(size) != 0:
				return resource.Quantity{}, fmt.Errorf("medium %s can't be used if container requests multiple huge page sizes", medium)
			default:
				found = &size
			}
		}
	}
	if found == nil {
		return resource.Quantity{}, fmt.Errorf("medium %s: hugePages storage requested, but there is no resource request for huge pages", medium)
	}
	return *found, nil
}
