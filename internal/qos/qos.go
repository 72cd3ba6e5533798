// Package qos computes a pod's Kubernetes QoS class, which decides its
// cgroup, its OOM score and its eviction order.
package qos

import v1 "k8s.io/api/core/v1"

// PodQOSClass is the Kubernetes QoS class of a pod (ComputePodQOS): only cpu
// and memory count, and only quantities above zero. Pod-level resources,
// when set, decide alone; otherwise every regular and init container does.
// Guaranteed needs cpu and memory limits everywhere and requests equal to
// limits; BestEffort has neither requests nor limits; the rest is Burstable.
// It reads the spec only: the class is fixed for the pod's life.
func PodQOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	add := func(r v1.ResourceRequirements) {
		sum(requests, r.Requests)
		if sum(limits, r.Limits) < 2 {
			guaranteed = false // a cpu or memory limit is missing
		}
	}
	if pr := pod.Spec.Resources; pr != nil && (namesCPUOrMemory(pr.Requests) || namesCPUOrMemory(pr.Limits)) {
		sum(requests, pr.Requests)
		if len(pr.Limits) > 0 && sum(limits, pr.Limits) < 2 {
			guaranteed = false
		}
	} else {
		for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				add(list[i].Resources)
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed && len(requests) == len(limits) {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
		if guaranteed {
			return v1.PodQOSGuaranteed
		}
	}
	return v1.PodQOSBurstable
}

// sum adds the positive cpu and memory quantities of from into into and
// returns how many of the two it found.
func sum(into, from v1.ResourceList) int {
	found := 0
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		q, ok := from[name]
		if !ok || q.Sign() <= 0 {
			continue
		}
		found++
		total := q.DeepCopy()
		if prev, ok := into[name]; ok {
			total.Add(prev)
		}
		into[name] = total
	}
	return found
}

func namesCPUOrMemory(l v1.ResourceList) bool {
	_, cpu := l[v1.ResourceCPU]
	_, mem := l[v1.ResourceMemory]
	return cpu || mem
}
