package cm

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/qos"
)

// PodResourceConfig is the configuration of a pod's own cgroup, the
// kubelet's ResourceConfigForPod plus its pod pids limit:
//
//   - cpu.shares from the pod's CPU request, the CFS quota from its CPU
//     limit over QuotaPeriod, the memory limit from its memory limit;
//   - the pod's request and limit are the kubelet's (component-helpers
//     PodRequests / PodLimits): the sum over the app containers and
//     sidecars, or the peak while an init container runs if that is larger,
//     plus the pod overhead; pod-level resources, when set, win;
//   - a Burstable pod gets a CPU (memory) limit only when every container,
//     init containers included, has one, or the pod sets one itself:
//     otherwise one unlimited container would be capped by its siblings'
//     limits;
//   - a BestEffort pod gets only cpu.shares = 2.
//
// pidsLimit > 0 becomes the pod's pids.max, whatever its class. The pod's
// huge page requests are its hugetlb limits; sizes it does not ask for are
// limited to 0.
func PodResourceConfig(pod *v1.Pod, pidsLimit int64) ResourceConfig {
	pod = withDefaultRequests(pod)
	var rc ResourceConfig
	if pidsLimit > 0 {
		rc.PidsLimit = ptr.To(pidsLimit)
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	// Huge page requests equal their limits (API validation), so the
	// kubelet takes the pod's limit from its requests, whatever its class.
	rc.HugePageLimit = HugePageLimits(requests)
	class := qos.PodQOSClass(pod)
	if class == v1.PodQOSBestEffort {
		rc.CPUShares = ptr.To(uint64(MinShares))
		return rc
	}
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	rc.CPUShares = ptr.To(MilliCPUToShares(requests.Cpu().MilliValue()))
	if class == v1.PodQOSGuaranteed || limitDeclared(pod, v1.ResourceCPU) {
		rc.CPUQuota = ptr.To(MilliCPUToQuota(limits.Cpu().MilliValue(), QuotaPeriod))
		rc.CPUPeriod = ptr.To(uint64(QuotaPeriod))
	}
	if class == v1.PodQOSGuaranteed || limitDeclared(pod, v1.ResourceMemory) {
		rc.Memory = ptr.To(limits.Memory().Value())
	}
	return rc
}

// limitDeclared reports whether the pod as a whole is limited in name: by
// a pod-level limit, or by a limit on every one of its containers.
func limitDeclared(pod *v1.Pod, name v1.ResourceName) bool {
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Limits[name]; ok && !q.IsZero() {
			return true
		}
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if q, ok := list[i].Resources.Limits[name]; !ok || q.IsZero() {
				return false
			}
		}
	}
	return true
}

// withDefaultRequests returns pod, or a copy of it in which every container
// limit stands in for a missing request of the same resource, as the API
// server's defaulting does. Manifests reach berth defaulted already; this
// keeps a pod that skipped defaulting from being classed or sized
// differently from the kubelet.
func withDefaultRequests(pod *v1.Pod) *v1.Pod {
	if !missingRequests(pod) {
		return pod
	}
	out := pod.DeepCopy()
	for _, list := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			r := &list[i].Resources
			for name, limit := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = make(v1.ResourceList, len(r.Limits))
					}
					r.Requests[name] = limit.DeepCopy()
				}
			}
		}
	}
	return out
}

func missingRequests(pod *v1.Pod) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			for name := range list[i].Resources.Limits {
				if _, ok := list[i].Resources.Requests[name]; !ok {
					return true
				}
			}
		}
	}
	return false
}
