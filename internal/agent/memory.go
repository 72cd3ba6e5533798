package agent

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/cm/cgroupfs"
	"github.com/berth-dev/berth/internal/config"
)

// nodeMemory checks the memory settings against the host and resolves
// them, as the kubelet does before it starts anything: swap on with
// failSwapOn, singleProcessOOMKill=false or LimitedSwap on cgroup v1 stop
// start-up with the field and the reason.
func nodeMemory(cfg *config.Config, log *slog.Logger) (cm.MemoryPolicy, error) {
	w, err := cgroupfs.New(cgroupMount)
	if err != nil {
		return cm.MemoryPolicy{}, fmt.Errorf("cgroups: %w", err)
	}
	self, err := selfCgroupV2("/proc/self/cgroup")
	if err != nil && w.Version() == 2 {
		return cm.MemoryPolicy{}, err
	}
	host, err := cm.ReadMemoryHost(cm.HostMemoryFiles{SwapControl: w.SwapControlFile(self)}, w.Version() == 2)
	if err != nil {
		return cm.MemoryPolicy{}, fmt.Errorf("node memory: %w", err)
	}
	policy, err := cm.ResolveMemoryPolicy(cfg.Memory.Settings(), host)
	if err != nil {
		return cm.MemoryPolicy{}, fmt.Errorf("invalid configuration for this host (cgroup v%d, swap on: %v):\n%w", w.Version(), host.SwapOn, err)
	}
	log.Info("memory policy", "cgroupVersion", w.Version(), "swapOn", host.SwapOn, "swapController", host.SwapController,
		"swapBehavior", policy.SwapBehavior, "singleProcessOOMKill", policy.SingleProcessOOMKill, "hugePageSizes", host.HugePageSizes)
	return policy, nil
}

// selfCgroupV2 is berth's own cgroup in the unified hierarchy, the path of
// the "0::" line of /proc/self/cgroup.
func selfCgroupV2(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("berth's own cgroup: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if p, ok := strings.CutPrefix(s.Text(), "0::"); ok {
			return p, nil
		}
	}
	if err := s.Err(); err != nil {
		return "", fmt.Errorf("berth's own cgroup: read %s: %w", file, err)
	}
	return "", fmt.Errorf("berth's own cgroup: %s has no cgroup v2 line", file)
}
