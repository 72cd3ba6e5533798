package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/qos"
)

// containerResources computes the cgroup values of one container the way the
// kubelet's calculateLinuxResources does: shares from the CPU request (from the
// limit if only that is set), quota from the CPU limit over the standard
// 100ms period, the memory limit, and the OOM score adjustment of the pod's
// QoS class; then the node's memory policy (applyMemoryPolicy).
func containerResources(pod *v1.Pod, c *v1.Container, memoryCapacity int64, memory cm.MemoryPolicy) (*runtimeapi.LinuxContainerResources, error) {
	cpuRequest := c.Resources.Requests.Cpu()
	cpuLimit := c.Resources.Limits.Cpu()
	r := &runtimeapi.LinuxContainerResources{
		CpuPeriod:          cm.QuotaPeriod,
		CpuQuota:           cm.MilliCPUToQuota(cpuLimit.MilliValue(), cm.QuotaPeriod),
		MemoryLimitInBytes: c.Resources.Limits.Memory().Value(),
	}
	// The API server defaults a missing request to the limit; repeat that here
	// for pods that did not go through it.
	if cpuRequest.IsZero() && !cpuLimit.IsZero() {
		r.CpuShares = int64(cm.MilliCPUToShares(cpuLimit.MilliValue()))
	} else {
		r.CpuShares = int64(cm.MilliCPUToShares(cpuRequest.MilliValue()))
	}
	oom, err := OOMScoreAdjust(pod, c, memoryCapacity)
	if err != nil {
		return nil, err
	}
	r.OomScoreAdj = int64(oom)
	applyMemoryPolicy(r, pod, c, memory)
	return r, nil
}

// OOM score adjustments of the kubelet (pkg/kubelet/qos/policy.go).
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// OOMScoreAdjust returns the oom_score_adj of container c of pod, as the
// kubelet's GetContainerOOMScoreAdjust computes it: -997 for node-critical and
// Guaranteed pods, 1000 for BestEffort pods, and for Burstable pods
// 1000 - 1000*memoryRequest/memoryCapacity clamped to [3, 999], so that a
// Burstable container is always killed before a Guaranteed one and after a
// BestEffort one. A sidecar (restartable init container) never scores above
// the regular container with the smallest request, so it outlives the
// containers it serves. With pod-level requests, the part of the pod's
// memory request not claimed by any container is shared out equally.
func OOMScoreAdjust(pod *v1.Pod, c *v1.Container, memoryCapacity int64) (int, error) {
	if isNodeCriticalPod(pod) {
		return guaranteedOOMScoreAdj, nil
	}
	switch qos.PodQOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj, nil
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj, nil
	}
	if memoryCapacity <= 0 {
		return 0, fmt.Errorf("container %q: the node's memory capacity is needed for the OOM score of a Burstable pod", c.Name)
	}
	var extra int64
	if podLevelMemoryRequest(pod) > 0 {
		extra = remainingPodMemoryRequestPerContainer(pod)
	}
	adj := 1000 - 1000*(c.Resources.Requests.Memory().Value()+extra)/memoryCapacity
	if isSidecar(pod, c) && len(pod.Spec.Containers) > 0 {
		floor := 1000 - 1000*(minRegularContainerMemoryRequest(pod)+extra)/memoryCapacity
		adj = min(adj, floor)
	}
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj, nil
	}
	if adj == besteffortOOMScoreAdj {
		return besteffortOOMScoreAdj - 1, nil
	}
	return int(adj), nil
}

// isSidecar reports whether c is one of the pod's restartable init containers.
func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

func minRegularContainerMemoryRequest(pod *v1.Pod) int64 {
	least := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
	for i := range pod.Spec.Containers[1:] {
		least = min(least, pod.Spec.Containers[i+1].Resources.Requests.Memory().Value())
	}
	return least
}

func podLevelMemoryRequest(pod *v1.Pod) int64 {
	if pod.Spec.Resources == nil {
		return 0
	}
	return pod.Spec.Resources.Requests.Memory().Value()
}

// remainingPodMemoryRequestPerContainer divides the pod-level memory request
// that no container claims equally among all containers.
func remainingPodMemoryRequestPerContainer(pod *v1.Pod) int64 {
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if n == 0 {
		return 0
	}
	return (podLevelMemoryRequest(pod) - aggregateContainerMemoryRequest(pod)) / n
}

// aggregateContainerMemoryRequest is the pod's effective memory request from
// its containers: the sum over regular containers and sidecars, or the peak
// while an init container runs next to the sidecars started before it,
// whichever is larger (the sidecar KEP's formula).
func aggregateContainerMemoryRequest(pod *v1.Pod) int64 {
	var running int64
	for i := range pod.Spec.Containers {
		running += pod.Spec.Containers[i].Resources.Requests.Memory().Value()
	}
	var sidecars, initPeak int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := c.Resources.Requests.Memory().Value()
		if isSidecar(pod, c) {
			running += req
			sidecars += req
			initPeak = max(initPeak, sidecars)
		} else {
			initPeak = max(initPeak, sidecars+req)
		}
	}
	return max(running, initPeak)
}

// Priority thresholds and the class name of node-critical pods
// (k8s.io/kubernetes pkg/apis/scheduling).
const (
	systemCriticalPriority = 2 * 1000000000
	systemNodeCritical     = "system-node-critical"

	configSourceAnnotation = "kubernetes.io/config.source"
	configMirrorAnnotation = "kubernetes.io/config.mirror"
	apiserverSource        = "api"
)

// isNodeCriticalPod mirrors the kubelet's IsNodeCriticalPod: a critical pod
// (static, mirror, or of system-critical priority) in the
// system-node-critical priority class.
func isNodeCriticalPod(pod *v1.Pod) bool {
	return pod.Spec.PriorityClassName == systemNodeCritical && isCriticalPod(pod)
}

func isCriticalPod(pod *v1.Pod) bool {
	if src, ok := pod.Annotations[configSourceAnnotation]; ok && src != apiserverSource {
		return true // static pod
	}
	if _, ok := pod.Annotations[configMirrorAnnotation]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}
