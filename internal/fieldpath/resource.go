package fieldpath

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ExtractResourceValue resolves a downward API resourceFieldRef (kubelet
// containerResourceRuntimeValue): a request or limit of the container the
// selector names, or of c when it names none, divided by the divisor and
// rounded up. c may be nil (a volume file belongs to no container), and then
// the selector must name one. A limit the container does not set reads as
// the node's allocatable amount, as the kubelet's
// defaultPodLimitsForDownwardAPI arranges.
func ExtractResourceValue(pod *v1.Pod, c *v1.Container, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	target := c
	if ref.ContainerName != "" && (c == nil || ref.ContainerName != c.Name) {
		target = findContainer(pod, ref.ContainerName)
		if target == nil {
			return "", fmt.Errorf("container %q named in the selector is not in the pod", ref.ContainerName)
		}
	}
	if target == nil {
		return "", fmt.Errorf("resource %q: the selector must name a container", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	rn := v1.ResourceName(name)
	if rn != v1.ResourceCPU && rn != v1.ResourceMemory && rn != v1.ResourceEphemeralStorage &&
		!strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	var q resource.Quantity
	if kind == "requests" {
		q = target.Resources.Requests[rn]
	} else {
		var set bool
		if q, set = target.Resources.Limits[rn]; !set && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			q = allocatable[rn]
		}
	}
	if rn == v1.ResourceCPU {
		return strconv.FormatInt(ceilDiv(q.MilliValue(), divisor.MilliValue()), 10), nil
	}
	return strconv.FormatInt(ceilDiv(q.Value(), divisor.Value()), 10), nil
}

// ceilDiv divides two non-negative quantities rounding up, so that a
// container never reads less than it was given (250m of CPU with divisor 1
// reads 1).
func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
