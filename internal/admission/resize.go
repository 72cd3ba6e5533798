package admission

import v1 "k8s.io/api/core/v1"

// Fit is the resource fit alone (no node predicates), for a pod already on
// the node whose requests change: the kubelet's resize admission runs its
// admit handlers against the other pods' allocated resources, and of them
// only the fit can tell a running pod no.
func Fit(pod *PodInfo, allocatable v1.ResourceList, others []*PodInfo) []InsufficientResource {
	return fit(pod, amounts(allocatable), others)
}
