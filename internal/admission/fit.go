package admission

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// InsufficientResource is the kubelet's InsufficientResourceError: the pod
// asks for more of one resource than the node's allocatable leaves after
// the requests of its active pods. Amounts are in the kubelet's units.
type InsufficientResource struct {
	Resource  v1.ResourceName `json:"resource"`
	Requested int64           `json:"requested"`
	Used      int64           `json:"used"`
	// Capacity is the node's allocatable, as the kubelet's message calls it.
	Capacity int64 `json:"capacity"`
}

// Error is the kubelet's message.
func (e InsufficientResource) Error() string {
	return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		e.Resource, e.Requested, e.Used, e.Capacity)
}

// Shortfall is how much would have to be freed for the pod to fit.
func (e InsufficientResource) Shortfall() int64 { return e.Requested - (e.Capacity - e.Used) }

// Reason is the kubelet's rejection reason: OutOfcpu, OutOfmemory,
// OutOfpods, OutOfexample.com/gpu.
func (e InsufficientResource) Reason() string { return "OutOf" + string(e.Resource) }

// fit is the scheduler's resource fit as the kubelet runs it at admission
// (noderesources.Fits): a pod slot under maxPods first, then cpu, memory,
// ephemeral-storage, then every other requested resource by name.
//
// As the kubelet does, an extended resource the node does not list at all
// is not checked: it may be a cluster-level resource, or its device plugin
// has not registered yet, which device admission then waits for.
func fit(pod *PodInfo, allocatable map[v1.ResourceName]int64, active []*PodInfo) []InsufficientResource {
	var out []InsufficientResource
	if allowed := allocatable[v1.ResourcePods]; int64(len(active))+1 > allowed {
		out = append(out, InsufficientResource{Resource: v1.ResourcePods, Requested: 1, Used: int64(len(active)), Capacity: allowed})
	}
	for _, name := range requestOrder(pod.Requests) {
		requested := pod.Requests[name]
		if requested <= 0 || name == v1.ResourcePods {
			continue
		}
		capacity, listed := allocatable[name]
		if !listed && v1helper.IsExtendedResourceName(name) {
			continue
		}
		var used int64
		for _, p := range active {
			used += p.Requests[name]
		}
		if requested > capacity-used {
			out = append(out, InsufficientResource{Resource: name, Requested: requested, Used: used, Capacity: capacity})
		}
	}
	return out
}

// requestOrder is the order the scheduler checks resources in, with the
// rest sorted so that the first reason is the same on every run.
func requestOrder(requests map[v1.ResourceName]int64) []v1.ResourceName {
	first := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}
	var rest []v1.ResourceName
	for name := range requests {
		if !slices.Contains(first, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(first, rest...)
}
