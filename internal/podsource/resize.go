package podsource

import (
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/qos"
)

// ResizeOnly reports whether want differs from stored only in the cpu and
// memory of its containers' resources, without changing the pod's QoS
// class: a change the API server would take through the resize
// subresource, which berth applies in place. Any other change (another
// resource, the class, a pod-level resource) replaces the pod, as before.
func ResizeOnly(stored, want *v1.Pod) bool {
	if qos.PodQOSClass(stored) != qos.PodQOSClass(want) {
		return false
	}
	a, b := stored.DeepCopy(), want.DeepCopy()
	for _, p := range []*v1.Pod{a, b} {
		p.UID = ""
		p.CreationTimestamp = metav1.Time{}
		p.Generation, p.ResourceVersion = 0, ""
		p.Status = v1.PodStatus{}
	}
	if len(a.Spec.Containers) != len(b.Spec.Containers) || len(a.Spec.InitContainers) != len(b.Spec.InitContainers) {
		return false
	}
	changed := false
	for _, pair := range [][2][]v1.Container{{a.Spec.InitContainers, b.Spec.InitContainers}, {a.Spec.Containers, b.Spec.Containers}} {
		for i := range pair[0] {
			x, y := &pair[0][i].Resources, &pair[1][i].Resources
			if !cpuMemoryOnly(x, y) {
				return false
			}
			if !apiequality.Semantic.DeepEqual(*x, *y) {
				changed = true
			}
			*x = v1.ResourceRequirements{}
			*y = v1.ResourceRequirements{}
		}
	}
	return changed && apiequality.Semantic.DeepEqual(a, b)
}

// cpuMemoryOnly reports whether x and y differ in cpu and memory alone.
func cpuMemoryOnly(x, y *v1.ResourceRequirements) bool {
	strip := func(l v1.ResourceList) v1.ResourceList {
		out := v1.ResourceList{}
		for k, v := range l {
			if k != v1.ResourceCPU && k != v1.ResourceMemory {
				out[k] = v
			}
		}
		return out
	}
	return apiequality.Semantic.DeepEqual(strip(x.Requests), strip(y.Requests)) &&
		apiequality.Semantic.DeepEqual(strip(x.Limits), strip(y.Limits)) &&
		apiequality.Semantic.DeepEqual(x.Claims, y.Claims)
}
