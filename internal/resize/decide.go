// Package resize is in-place pod resize (InPlacePodVerticalScaling, GA in
// Kubernetes 1.35) as the v1.36 kubelet does it: the resources admitted to
// each container (allocated) and those applied to it (actuated) are kept in
// a checkpoint; a spec whose resources differ from the allocation is
// admitted against the node's allocatable and the other pods' allocations
// (the allocation manager's handlePodResourcesResize); what differs between
// allocated and actuated becomes per-container updates or restarts
// (kuberuntime's computePodResizeAction), applied around the pod cgroup in
// the kubelet's order (doPodResizeAction); and the pod's status shows
// allocatedResources, resources and the PodResizePending and
// PodResizeInProgress conditions.
//
// The decisions are the pure functions of this file and order.go; Manager
// owns the state; the pod worker does the I/O.
package resize

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/berth-dev/berth/internal/admission"
)

// Allocation is the resources of each container of a pod, by name: regular
// and init containers (sidecars and, since InPlacePodVerticalScaling-
// InitContainers went beta in 1.36, the others too).
type Allocation map[string]v1.ResourceRequirements

// AllocationOf is pod's containers' resources as its spec has them (the
// kubelet's allocationFromPod).
func AllocationOf(pod *v1.Pod) Allocation {
	out := Allocation{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			out[list[i].Name] = *list[i].Resources.DeepCopy()
		}
	}
	return out
}

// WithAllocation is pod with its containers' resources replaced by those of
// a, and whether that changed anything (the kubelet's
// updatePodFromAllocation). Containers a does not know keep their spec.
func WithAllocation(pod *v1.Pod, a Allocation) (*v1.Pod, bool) {
	if a == nil {
		return pod, false
	}
	var out *v1.Pod
	for _, which := range []func(*v1.Pod) []v1.Container{
		func(p *v1.Pod) []v1.Container { return p.Spec.InitContainers },
		func(p *v1.Pod) []v1.Container { return p.Spec.Containers },
	} {
		for i, c := range which(pod) {
			alloc, ok := a[c.Name]
			if !ok || apiequality.Semantic.DeepEqual(c.Resources, alloc) {
				continue
			}
			if out == nil {
				out = pod.DeepCopy()
			}
			which(out)[i].Resources = *alloc.DeepCopy()
		}
	}
	if out == nil {
		return pod, false
	}
	return out, true
}

// The kubelet's reasons of a pending resize (v1.PodReasonDeferred,
// v1.PodReasonInfeasible): any reason other than Infeasible is shown as
// Deferred.
const (
	ReasonDeferred   = v1.PodReasonDeferred
	ReasonInfeasible = v1.PodReasonInfeasible
	// ReasonError is the PodResizeInProgress reason of a resize the
	// runtime or the cgroups refused.
	ReasonError = v1.PodReasonError
)

// Verdict is the decision about a pending resize.
type Verdict struct {
	Admit           bool
	Reason, Message string
}

// Node is what a resize is admitted against.
type Node struct {
	Allocatable v1.ResourceList
	// StaticCPUManager and StaticMemoryManager are the node's CPU and
	// memory manager policies being static. berth has neither manager
	// today; the fields keep the kubelet's rule in one place.
	StaticCPUManager, StaticMemoryManager bool
}

// Admit decides a resize: desired is the pod as its spec wants it,
// allocated the same pod with its allocated resources, others the other
// active pods with theirs. It is the kubelet's canAdmitPod for a
// ResizeOperation: the resize admit handler's refusals (Infeasible), then
// the resource fit, whose failures are Deferred (the resize may fit once
// other pods go).
func Admit(desired, allocated *v1.Pod, others []*v1.Pod, node Node) Verdict {
	if !apiequality.Semantic.DeepEqual(desired.Spec.Resources, allocated.Spec.Resources) {
		// berth resizes containers only; the kubelet's words for a node
		// without pod-level resize.
		return Verdict{Reason: ReasonInfeasible, Message: "InPlacePodLevelResourcesVerticalScaling is disabled"}
	}
	info := admission.NewPodInfo(desired)
	if info.QOS == v1.PodQOSGuaranteed {
		if node.StaticCPUManager && resizeRequired(desired, allocated, v1.ResourceCPU) {
			return Verdict{Reason: ReasonInfeasible, Message: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`}
		}
		if node.StaticMemoryManager && resizeRequired(desired, allocated, v1.ResourceMemory) {
			return Verdict{Reason: ReasonInfeasible, Message: `Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "static"`}
		}
	}
	infos := make([]*admission.PodInfo, 0, len(others))
	for _, p := range others {
		if p.UID != desired.UID {
			infos = append(infos, admission.NewPodInfo(p))
		}
	}
	if short := admission.Fit(info, node.Allocatable, infos); len(short) > 0 {
		return Verdict{Reason: ReasonDeferred, Message: short[0].Error()}
	}
	return Verdict{Admit: true}
}

// resizeRequired reports whether any container's request or limit of name
// differs between desired and allocated (guaranteedPodResourceResizeRequired).
func resizeRequired(desired, allocated *v1.Pod, name v1.ResourceName) bool {
	a := AllocationOf(allocated)
	for c, want := range AllocationOf(desired) {
		have := a[c]
		if !want.Requests[name].Equal(have.Requests[name]) || !want.Limits[name].Equal(have.Limits[name]) {
			return true
		}
	}
	return false
}

// Values are the four numbers of a container's resources a resize acts on:
// memory in bytes, cpu in millicores.
type Values struct {
	MemoryLimit, MemoryRequest, CPULimit, CPURequest int64
}

// ValuesOf is r's Values (containerResourcesFromRequirements).
func ValuesOf(r v1.ResourceRequirements) Values {
	return Values{
		MemoryLimit:   r.Limits.Memory().Value(),
		MemoryRequest: r.Requests.Memory().Value(),
		CPULimit:      r.Limits.Cpu().MilliValue(),
		CPURequest:    r.Requests.Cpu().MilliValue(),
	}
}

func (v Values) String() string {
	return fmt.Sprintf("cpu %dm/%dm memory %d/%d", v.CPURequest, v.CPULimit, v.MemoryRequest, v.MemoryLimit)
}
