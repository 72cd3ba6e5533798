package cm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The swap behaviours of KubeletConfiguration memorySwap.swapBehavior.
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// MemorySettings are the node's memory settings as configured.
type MemorySettings struct {
	// FailSwapOn refuses to start on a host with swap on (failSwapOn).
	FailSwapOn bool
	// SwapBehavior is memorySwap.swapBehavior: "" (NoSwap), NoSwap or
	// LimitedSwap.
	SwapBehavior string
	// SingleProcessOOMKill is singleProcessOOMKill, nil when unset.
	SingleProcessOOMKill *bool
}

// MemoryHost is what the host says about memory, swap and huge pages.
type MemoryHost struct {
	// CgroupV2 is a unified cgroup v2 host. A hybrid host (v1 controllers
	// plus a cgroup2 mount at /sys/fs/cgroup/unified) is v1, as it is for
	// the kubelet (libcontainer's IsCgroup2UnifiedMode).
	CgroupV2 bool
	// SwapOn is whether /proc/swaps lists any swap device.
	SwapOn bool
	// SwapController is whether swap can be limited per cgroup:
	// memory.memsw.limit_in_bytes on v1, memory.swap.max on v2.
	SwapController bool
	// MemoryCapacity and SwapCapacity are MemTotal and SwapTotal in bytes.
	MemoryCapacity, SwapCapacity int64
	// HugePageSizes are the page sizes the kernel offers, in bytes.
	HugePageSizes []int64
}

// MemoryPolicy is what berth does with the memory of containers: the
// settings resolved against the host, as the kubelet resolves them at
// start-up.
type MemoryPolicy struct {
	MemoryHost
	// SwapBehavior is NoSwap or LimitedSwap.
	SwapBehavior string
	// SingleProcessOOMKill leaves memory.oom.group unset: on an OOM only
	// the chosen process dies, not the whole container.
	SingleProcessOOMKill bool
}

// ResolveMemoryPolicy checks the settings against the host and resolves
// their defaults, as the kubelet does at start-up (its OS validation,
// NewContainerManager and NewMainKubelet): swap on with failSwapOn stops
// it, singleProcessOOMKill=false and LimitedSwap are refused on cgroup v1,
// and singleProcessOOMKill defaults to true on v1 (where memory.oom.group
// does not exist) and to false on v2.
func ResolveMemoryPolicy(s MemorySettings, h MemoryHost) (MemoryPolicy, error) {
	var errs []error
	if h.SwapOn && s.FailSwapOn {
		errs = append(errs, errors.New("failSwapOn: true: running with swap on is not supported; disable swap or set failSwapOn to false"))
	}
	if !h.CgroupV2 && s.SingleProcessOOMKill != nil && !*s.SingleProcessOOMKill {
		errs = append(errs, errors.New("singleProcessOOMKill: false: must not be explicitly set to false when using cgroup v1, which has no memory.oom.group"))
	}
	behavior := s.SwapBehavior
	if behavior == "" {
		behavior = NoSwap
	}
	if behavior == LimitedSwap && !h.CgroupV2 {
		errs = append(errs, errors.New("memorySwap.swapBehavior: LimitedSwap: is only supported with cgroup v2"))
	}
	if err := errors.Join(errs...); err != nil {
		return MemoryPolicy{}, err
	}
	single := true
	if h.CgroupV2 {
		single = s.SingleProcessOOMKill != nil && *s.SingleProcessOOMKill
	}
	return MemoryPolicy{MemoryHost: h, SwapBehavior: behavior, SingleProcessOOMKill: single}, nil
}

// SwapForBurstable is the swap a LimitedSwap Burstable container gets: its
// share of the node's memory, request/capacity, of the node's swap (the
// kubelet's calcSwapForBurstablePods, KEP 2400), computed in float64 and
// truncated as the kubelet does so that the bytes match.
func SwapForBurstable(memoryRequest, memoryCapacity, swapCapacity int64) (int64, error) {
	if memoryCapacity <= 0 {
		return 0, errors.New("total node memory is 0")
	}
	if memoryRequest > memoryCapacity {
		return 0, fmt.Errorf("container request %d is larger than total node memory %d", memoryRequest, memoryCapacity)
	}
	share := float64(memoryRequest) / float64(memoryCapacity)
	return int64(share * float64(swapCapacity)), nil
}

// HugePageUnitSize names a page size the way cgroup files and the CRI do
// ("2MB", "1GB"): the size in the largest unit that divides it (the
// kubelet's HugePageUnitSizeFromByteSize).
func HugePageUnitSize(size int64) (string, error) {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for size > 0 && size%1024 == 0 && i < len(units)-1 {
		size /= 1024
		i++
	}
	if size <= 0 || (size > 1024 && i < len(units)-1) {
		return "", fmt.Errorf("huge page size %d%s: must be a positive number of a binary unit", size, units[i])
	}
	return fmt.Sprintf("%d%s", size, units[i]), nil
}

// HostMemoryFiles are the kernel files ReadMemoryHost reads; empty fields
// mean the host's own.
type HostMemoryFiles struct {
	Swaps     string // /proc/swaps
	Meminfo   string // /proc/meminfo
	Hugepages string // /sys/kernel/mm/hugepages
	// SwapControl is the file whose presence says swap is limited per
	// cgroup: memory.memsw.limit_in_bytes on v1, memory.swap.max of
	// berth's own cgroup on v2.
	SwapControl string
}

// ReadMemoryHost reads the swap and huge page facts of the host.
func ReadMemoryHost(f HostMemoryFiles, cgroupV2 bool) (MemoryHost, error) {
	h := MemoryHost{CgroupV2: cgroupV2}
	swaps, err := os.ReadFile(orHost(f.Swaps, "/proc/swaps"))
	if err != nil {
		return h, fmt.Errorf("read the swap devices: %w", err)
	}
	h.SwapOn = swapOn(string(swaps))
	meminfo := orHost(f.Meminfo, "/proc/meminfo")
	if h.MemoryCapacity, err = memTotal(meminfo); err != nil {
		return h, err
	}
	if h.SwapCapacity, err = meminfoField(meminfo, "SwapTotal:"); err != nil {
		return h, err
	}
	if f.SwapControl != "" {
		_, err := os.Stat(f.SwapControl)
		h.SwapController = err == nil
	}
	h.HugePageSizes, err = hugePageSizes(orHost(f.Hugepages, "/sys/kernel/mm/hugepages"))
	return h, err
}

func orHost(path, host string) string {
	if path == "" {
		return host
	}
	return path
}

// swapOn reads /proc/swaps: a header line, then one line per swap device.
func swapOn(procSwaps string) bool {
	lines := strings.Split(strings.TrimSpace(procSwaps), "\n")
	return len(lines) > 1
}

// hugePageSizes lists the page sizes of dir's hugepages-<N>kB entries,
// smallest first; no dir means no huge pages.
func hugePageSizes(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the huge page sizes: %w", err)
	}
	var out []int64
	for _, e := range entries {
		size, err := hugepageSize(e.Name())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, e.Name()), err)
		}
		out = append(out, size)
	}
	slices.Sort(out)
	return out, nil
}

// HugePageSizes lists the host's huge page sizes in bytes, smallest first,
// from dir ("" for /sys/kernel/mm/hugepages).
func HugePageSizes(dir string) ([]int64, error) {
	return hugePageSizes(orHost(dir, "/sys/kernel/mm/hugepages"))
}
