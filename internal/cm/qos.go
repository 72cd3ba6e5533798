package cm

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/qos"
)

// QOSConfigs computes the burstable and besteffort cgroups' configuration
// from the node's active pods, as the kubelet's QoS container manager does
// (setCPUCgroupConfig, setMemoryReserve).
//
// besteffort always gets cpu.shares = 2. burstable gets the shares of the
// sum of the Burstable pods' CPU requests (at least 2), so that a share in a
// Burstable pod's cgroup is worth as much CPU as one in a Guaranteed pod's,
// which sits directly under kubepods.
//
// memoryReservePercent is qosReserved's memory percentage, nil when unset:
// the share of the memory requested by higher classes that lower classes
// may not use. With it, and allocatableMemory > 0:
//
//	burstable  = allocatableMemory - requests(Guaranteed)*P/100
//	besteffort = burstable - requests(Burstable)*P/100
//
// allocatableMemory is the kubelet's GetNodeAllocatableAbsolute: memory
// capacity minus kubeReserved and systemReserved, without the eviction
// threshold (NodeAllocatableAbsolute). Where the kubelet would try to write
// a negative limit, berth stops at 0; admission never lets it come to that,
// since the requests of admitted pods fit in allocatable.
func QOSConfigs(pods []*v1.Pod, allocatableMemory int64, memoryReservePercent *int64) (burstable, besteffort ResourceConfig) {
	var burstableMilliCPU int64
	memoryRequests := map[v1.PodQOSClass]int64{}
	reuse := make(v1.ResourceList, 4)
	for _, pod := range pods {
		pod = withDefaultRequests(pod)
		class := qos.PodQOSClass(pod)
		if class == v1.PodQOSBestEffort {
			continue
		}
		requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{Reuse: reuse})
		if class == v1.PodQOSBurstable {
			burstableMilliCPU += requests.Cpu().MilliValue()
		}
		memoryRequests[class] += requests.Memory().Value()
	}
	burstable.CPUShares = ptr.To(MilliCPUToShares(burstableMilliCPU))
	besteffort.CPUShares = ptr.To(uint64(MinShares))

	if memoryReservePercent == nil || allocatableMemory <= 0 {
		return burstable, besteffort
	}
	// Each class's reservation is rounded down on its own, as the kubelet
	// does, so besteffort is not allocatable - (G+B)*P/100 to the byte.
	percent := *memoryReservePercent
	burstableLimit := allocatableMemory - memoryRequests[v1.PodQOSGuaranteed]*percent/100
	besteffortLimit := burstableLimit - memoryRequests[v1.PodQOSBurstable]*percent/100
	burstable.Memory = ptr.To(max(burstableLimit, 0))
	besteffort.Memory = ptr.To(max(besteffortLimit, 0))
	return burstable, besteffort
}

// KubepodsConfig is the configuration of the kubepods cgroup, the
// kubelet's node allocatable cgroup. allocatable should be
// NodeAllocatableAbsolute (capacity minus kubeReserved and systemReserved),
// not Allocatable: the kubelet leaves the hard eviction threshold inside
// kubepods, so that pods may use that memory until eviction reclaims it
// rather than be OOM-killed before eviction ever sees pressure.
//
// cpu.shares always comes from allocatable's CPUs: without it the kernel's
// default 1024 would starve pods against system cgroups. When
// enforceNodeAllocatable contains "pods" (enforcePods), the memory limit and
// pids.max are allocatable's memory and pids (unset if it has none);
// otherwise both are unlimited, which the kubelet spells as the whole
// machine's capacity. Each huge page size is limited to the pages the node
// has of it (getCgroupConfig's HugePageLimits).
func KubepodsConfig(allocatable v1.ResourceList, enforcePods bool) ResourceConfig {
	var rc ResourceConfig
	if q, ok := allocatable[v1.ResourceCPU]; ok {
		rc.CPUShares = ptr.To(MilliCPUToShares(q.MilliValue()))
	}
	// The huge pages are the node's in either case: no reservation can
	// take any of them.
	rc.HugePageLimit = HugePageLimits(allocatable)
	if !enforcePods {
		rc.Memory = ptr.To(int64(-1))
		rc.PidsLimit = ptr.To(int64(-1))
		return rc
	}
	if q, ok := allocatable[v1.ResourceMemory]; ok {
		rc.Memory = ptr.To(q.Value())
	}
	if q, ok := allocatable[ResourcePID]; ok {
		rc.PidsLimit = ptr.To(q.Value())
	}
	return rc
}

// hugePagesUnbounded is the hugetlb limit of the QoS cgroups, 1<<62 as the
// kubelet writes it: pods are bounded by their own cgroups and kubepods.
const hugePagesUnbounded = int64(1) << 62

// QOSHugePageLimits are the QoS cgroups' hugetlb limits: unbounded for
// every page size the host has (the kubelet's setHugePagesUnbounded).
func QOSHugePageLimits(pageSizes []int64) map[int64]int64 {
	out := make(map[int64]int64, len(pageSizes))
	for _, size := range pageSizes {
		out[size] = hugePagesUnbounded
	}
	return out
}
