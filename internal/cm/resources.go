package cm

// CPU conversions of the kubelet (pkg/kubelet/cm/helpers_linux.go). The
// share bounds are the kernel's (MIN_SHARES, MAX_SHARES in kernel/sched).
const (
	MinShares     = 2
	MaxShares     = 262144
	SharesPerCPU  = 1024
	MilliCPUToCPU = 1000

	// QuotaPeriod is the CFS period berth uses, 100ms, in microseconds.
	QuotaPeriod = 100000
	// MinQuotaPeriod is the smallest CFS quota the kernel accepts, 1ms.
	MinQuotaPeriod = 1000
)

// cgroup v2 cpu.weight bounds.
const (
	minWeight = 1
	maxWeight = 10000
)

// ResourceConfig is what berth writes into one cgroup. A nil field is left
// as it is (for a new cgroup: the kernel's default, unlimited).
type ResourceConfig struct {
	// CPUShares is cgroup v1 cpu.shares; on v2 it becomes cpu.weight
	// through SharesToWeight.
	CPUShares *uint64
	// CPUQuota is the CFS quota in microseconds per CPUPeriod; -1 is
	// unlimited.
	CPUQuota *int64
	// CPUPeriod is the CFS period in microseconds.
	CPUPeriod *uint64
	// Memory is the memory limit in bytes; -1 is unlimited.
	Memory *int64
	// PidsLimit is pids.max; -1 is unlimited.
	PidsLimit *int64
	// HugePageLimit maps a huge page size to its hugetlb limit, both in
	// bytes. Nil leaves hugetlb alone; otherwise every page size the host
	// has and the map leaves out is limited to 0, as the kubelet's cgroup
	// manager does (maybeSetHugetlb). A host without the hugetlb
	// controller gets none of it: for the kubelet, hugetlb is optional.
	HugePageLimit map[int64]int64
}

// MilliCPUToShares converts a CPU request in millicores to cpu.shares. No
// request maps to the minimum, 2, not to the kernel's default of 1024, so
// that a BestEffort cgroup really gets the least weight.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return MinShares
	}
	// Multiply first: dividing first would lose everything under one CPU.
	shares := milliCPU * SharesPerCPU / MilliCPUToCPU
	return uint64(min(max(shares, MinShares), MaxShares))
}

// MilliCPUToQuota converts a CPU limit in millicores to a CFS quota over
// period (microseconds). No limit (0) stays 0, which callers read as
// unlimited; any real limit gets at least the kernel's 1ms.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*period/MilliCPUToCPU, MinQuotaPeriod)
}

// SharesToWeight maps cgroup v1 cpu.shares, [2, 262144], linearly onto
// cgroup v2 cpu.weight, [1, 10000], as the kubelet does for the cgroups it
// owns (KEP 2254). Out-of-range shares are clamped first.
func SharesToWeight(shares uint64) uint64 {
	shares = min(max(shares, MinShares), MaxShares)
	return minWeight + (shares-MinShares)*(maxWeight-minWeight)/(MaxShares-MinShares)
}
