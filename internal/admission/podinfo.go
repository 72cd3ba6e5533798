package admission

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/berth-dev/berth/internal/qos"
	"github.com/berth-dev/berth/internal/v1helper"
)

// PodInfo is a pod with what admission needs of it worked out once: the
// caller keeps one per active pod, so that deciding over a thousand pods
// computes no requests.
type PodInfo struct {
	Pod *v1.Pod
	QOS v1.PodQOSClass
	// Requests are the pod's effective requests (its containers', its
	// init containers' and its overhead, as the scheduler adds them), in
	// the kubelet's units: millicores for cpu, the plain value for the
	// rest. Resources it does not request are absent.
	Requests map[v1.ResourceName]int64

	// name is namespace/name, worked out once.
	name string
}

// NewPodInfo works out pod's QoS class and requests.
func NewPodInfo(pod *v1.Pod) *PodInfo {
	return &PodInfo{
		Pod:      pod,
		QOS:      qos.PodQOSClass(pod),
		Requests: amounts(resourcehelper.PodRequests(withoutDRAExtendedResources(pod), resourcehelper.PodResourcesOptions{})),
		name:     pod.Namespace + "/" + pod.Name,
	}
}

// withoutDRAExtendedResources is pod without the requests of extended
// resources the scheduler allocated through its extended resource claim:
// a DRA driver serves those, and the node's allocatable does not list them
// (deviceclass.resource.kubernetes.io/<class> would not fit in a capacity
// of 0). The kubelet drops them from the pod it admits the same way
// (removeMissingExtendedResources).
func withoutDRAExtendedResources(pod *v1.Pod) *v1.Pod {
	if pod.Status.ExtendedResourceClaimStatus == nil {
		return pod
	}
	out := pod.DeepCopy()
	for _, cs := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			for name := range cs[i].Resources.Requests {
				if v1helper.BackedByDRA(pod, cs[i].Name, name) {
					delete(cs[i].Resources.Requests, name)
				}
			}
		}
	}
	return out
}

// key is the pod's namespace/name.
func (p *PodInfo) key() string {
	if p.name == "" {
		return p.Pod.Namespace + "/" + p.Pod.Name
	}
	return p.name
}

// Request is how much of name the pod asks for. Every pod takes one pod
// slot, which is how a critical pod can preempt for room under maxPods.
func (p *PodInfo) Request(name v1.ResourceName) int64 {
	if name == v1.ResourcePods {
		return 1
	}
	return p.Requests[name]
}

// amounts converts a resource list to the kubelet's integer units.
func amounts(l v1.ResourceList) map[v1.ResourceName]int64 {
	out := make(map[v1.ResourceName]int64, len(l))
	for name, q := range l {
		out[name] = amount(name, q)
	}
	return out
}

func amount(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}
