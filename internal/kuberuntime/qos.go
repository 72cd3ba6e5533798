package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
)

// qosComputeResources are the resources that decide a pod's QoS class; extended
// resources (devices, hugepages) do not.
var qosComputeResources = [...]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// QOSClass returns the pod's QoS class by the Kubernetes rules
// (k8s.io/kubernetes pkg/apis/core/v1/helper/qos ComputePodQOS):
//   - with pod-level resources (spec.resources), those alone decide;
//   - otherwise every container, init containers included, is classified on
//     its own: BestEffort if it sets no cpu or memory request or limit,
//     Guaranteed if cpu and memory both have a limit equal to the request,
//     Burstable otherwise; the pod is Burstable as soon as one container is,
//     or as soon as its containers disagree.
//
// The class is computed from the spec and never read from pod.Status, since it
// is immutable for the pod's life.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Spec.Resources != nil {
		return resourcesQOS(pod.Spec.Resources)
	}
	var class v1.PodQOSClass
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := resourcesQOS(&list[i].Resources)
			switch {
			case c == v1.PodQOSBurstable:
				return v1.PodQOSBurstable
			case class == "":
				class = c
			case class != c:
				return v1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return v1.PodQOSBestEffort
	}
	return class
}

// resourcesQOS classifies one set of requirements (a container's or the pod's).
func resourcesQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	var class v1.PodQOSClass
	for _, name := range qosComputeResources {
		req, lim := r.Requests[name], r.Limits[name]
		if req.Cmp(lim) != 0 {
			// At least one of the two is set, and they differ.
			return v1.PodQOSBurstable
		}
		c := v1.PodQOSGuaranteed
		if req.IsZero() {
			c = v1.PodQOSBestEffort
		}
		if class == "" {
			class = c
		} else if class != c {
			return v1.PodQOSBurstable
		}
	}
	return class
}
