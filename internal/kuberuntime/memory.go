package kuberuntime

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/qos"
)

// The cgroup v2 files berth sets through the CRI's unified map.
const (
	unifiedOOMGroup = "memory.oom.group"
	unifiedSwapMax  = "memory.swap.max"
)

// applyMemoryPolicy adds to r, whose memory limit is set, what the node's
// memory policy says of container c, as the kubelet's
// generateLinuxContainerResources does after calculateLinuxResources:
// memory.oom.group on cgroup v2 unless singleProcessOOMKill, a hugetlb
// limit per page size of the host, and the container's swap.
func applyMemoryPolicy(r *runtimeapi.LinuxContainerResources, pod *v1.Pod, c *v1.Container, p cm.MemoryPolicy) {
	if p.CgroupV2 && !p.SingleProcessOOMKill {
		// The kernel then kills the whole container on an OOM, not one
		// process that leaves the others half working.
		setUnified(r, unifiedOOMGroup, "1")
	}
	r.HugepageLimits = hugepageLimits(pod, c, p.HugePageSizes)
	applySwap(r, pod, c, p)
}

func setUnified(r *runtimeapi.LinuxContainerResources, key, value string) {
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[key] = value
}

// hugepageLimits lists a limit for every page size the host has: the
// container's hugepages-<size> limit, else the pod-level one, else 0 (the
// kubelet's GetHugepageLimitsFromResources). Sizes are smallest first.
func hugepageLimits(pod *v1.Pod, c *v1.Container, pageSizes []int64) []*runtimeapi.HugepageLimit {
	if len(pageSizes) == 0 {
		return nil
	}
	wanted := map[int64]int64{}
	if pod.Spec.Resources != nil {
		addHugepageLimits(wanted, pod.Spec.Resources.Limits)
	}
	addHugepageLimits(wanted, c.Resources.Limits)
	out := make([]*runtimeapi.HugepageLimit, 0, len(pageSizes))
	for _, size := range slices.Sorted(slices.Values(pageSizes)) {
		unit, err := cm.HugePageUnitSize(size)
		if err != nil {
			continue // the kernel names no such size
		}
		out = append(out, &runtimeapi.HugepageLimit{PageSize: unit, Limit: uint64(max(wanted[size], 0))})
	}
	return out
}

// addHugepageLimits sets the hugepages-<size> limits of list in m, a later
// list replacing an earlier one size by size.
func addHugepageLimits(m map[int64]int64, list v1.ResourceList) {
	for name, q := range list {
		if size, ok := cm.HugePageSize(name); ok {
			m[size] = q.Value()
		}
	}
}

// applySwap sets the container's swap where the host can limit it
// per cgroup (the kubelet's configureContainerSwapResources). NoSwap is, on
// v1, a memory+swap limit equal to the memory limit (0, no limit, when the
// container has none) and, on v2, memory.swap.max 0. LimitedSwap gives a
// Burstable container its share of the node's swap.
func applySwap(r *runtimeapi.LinuxContainerResources, pod *v1.Pod, c *v1.Container, p cm.MemoryPolicy) {
	if !p.SwapController {
		return
	}
	if containerSwapBehavior(pod, c, p) == cm.LimitedSwap {
		swap, err := cm.SwapForBurstable(c.Resources.Requests.Memory().Value(), p.MemoryCapacity, p.SwapCapacity)
		if err == nil {
			setUnified(r, unifiedSwapMax, strconv.FormatInt(swap, 10))
			return
		}
		// As the kubelet: swap that cannot be computed is no swap.
	}
	if !p.CgroupV2 {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	setUnified(r, unifiedSwapMax, "0")
}

// containerSwapBehavior is LimitedSwap only where the kubelet's
// GetContainerSwapBehavior allows it: configured so, on cgroup v2 with a
// swap controller, for a container of a non-critical Burstable pod that
// asks for memory with a request below its limit. Everything else is NoSwap.
func containerSwapBehavior(pod *v1.Pod, c *v1.Container, p cm.MemoryPolicy) string {
	if p.SwapBehavior != cm.LimitedSwap || !p.SwapController || !p.CgroupV2 || isCriticalPod(pod) {
		return cm.NoSwap
	}
	request, limit := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if qos.PodQOSClass(pod) != v1.PodQOSBurstable || (request.IsZero() && limit.IsZero()) || request.Cmp(*limit) == 0 {
		return cm.NoSwap
	}
	return cm.LimitedSwap
}
