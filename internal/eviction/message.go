package eviction

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Reason is the reason of an evicted pod's status, of the Evicted event and
// of an admission refused under pressure.
const Reason = "Evicted"

// The kubelet's message fragments, trailing spaces included, so that
// messages read (and match) as the kubelet's do.
const (
	nodeLowMessageFmt       = "The node was low on resource: %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	podMessageFmt           = "Pod %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "
)

// The annotations of the kubelet's Evicted event.
const (
	// OffendingContainersKey lists the containers using more than they
	// request, comma-separated.
	OffendingContainersKey = "offending_containers"
	// OffendingContainersUsageKey lists their usage, in the same order.
	OffendingContainersUsageKey = "offending_containers_usage"
	// StarvedResourceKey is the resource reclaimed.
	StarvedResourceKey = "starved_resource"
	// OffendingPodKey and OffendingPodUsageKey name a pod with a pod-level
	// memory request, and its usage.
	OffendingPodKey      = "offending_pod"
	OffendingPodUsageKey = "offending_pod_usage"
)

// evictionMessage explains why pod is evicted to reclaim r: the resource,
// the threshold and what was available, then, for memory, the pod's usage
// against its pod-level request when it has one (whatever the usage, as
// the kubelet does), and every container, init containers included, using
// more of it than it requests. The annotations say the same for tools;
// there are none when the pod has no stats.
func evictionMessage(r v1.ResourceName, pod *v1.Pod, stats statsFunc, thresholds []Threshold, obs observations) (string, map[string]string) {
	var b strings.Builder
	fmt.Fprintf(&b, nodeLowMessageFmt, r)
	if quantity, available, ok := thresholdMetInfo(r, thresholds, obs); ok {
		fmt.Fprintf(&b, thresholdMetMessageFmt, quantity, available)
	}
	annotations := map[string]string{}
	podStats, ok := stats(pod)
	if !ok {
		return b.String(), annotations
	}
	if podRequest, ok := podLevelRequest(pod, r); ok && podStats.Memory != nil {
		usage := memoryUsage(podStats.Memory)
		fmt.Fprintf(&b, podMessageFmt, pod.Name, &usage, &podRequest, r)
		annotations[OffendingPodKey] = pod.Name
		annotations[OffendingPodUsageKey] = usage.String()
	}
	// Init containers are judged too: a restartable one (a sidecar) runs
	// beside the others, and an ephemeral container, which has no
	// resources, is never blamed.
	specs := slices.Concat(pod.Spec.Containers, pod.Spec.InitContainers)
	var containers, usages []string
	for _, cs := range podStats.Containers {
		for i := range specs {
			c := &specs[i]
			if c.Name != cs.Name {
				continue
			}
			var usage *resource.Quantity
			switch r {
			case v1.ResourceEphemeralStorage:
				if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
					usage = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
				}
			case v1.ResourceMemory:
				if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
					usage = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
				}
			}
			request := c.Resources.Requests[r]
			if usage != nil && usage.Cmp(request) > 0 {
				fmt.Fprintf(&b, containerMessageFmt, c.Name, usage, &request, r)
				containers = append(containers, c.Name)
				usages = append(usages, usage.String())
			}
		}
	}
	annotations[OffendingContainersKey] = strings.Join(containers, ",")
	annotations[OffendingContainersUsageKey] = strings.Join(usages, ",")
	annotations[StarvedResourceKey] = string(r)
	return b.String(), annotations
}

// podLevelRequest is the pod-level request of r, which the kubelet names
// in a memory eviction's message.
func podLevelRequest(pod *v1.Pod, r v1.ResourceName) (resource.Quantity, bool) {
	if r != v1.ResourceMemory || !resourcehelper.IsPodLevelResourcesSet(pod) {
		return resource.Quantity{}, false
	}
	q, ok := pod.Spec.Resources.Requests[r]
	return q, ok
}

// thresholdMetInfo is the first threshold on r that was observed, resolved
// against the signal's capacity, and what was available.
func thresholdMetInfo(r v1.ResourceName, thresholds []Threshold, obs observations) (quantity, available *resource.Quantity, ok bool) {
	for _, t := range thresholds {
		if tr, _ := starvedResource(t.Signal); tr != r {
			continue
		}
		if o, found := obs[t.Signal]; found {
			return t.Value.quantity(o.capacity), o.available, true
		}
	}
	return nil, nil, false
}

// admissionMessage is the message of a pod refused under pressure, e.g.
// "The node had condition: [DiskPressure]. ".
func admissionMessage(conditions []v1.NodeConditionType) string {
	return fmt.Sprintf(nodeConditionMessageFmt, conditions)
}
