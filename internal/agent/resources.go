package agent

import (
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/cm/cgroupfs"
	"github.com/berth-dev/berth/internal/cm/hierarchy"
	"github.com/berth-dev/berth/internal/config"
)

// cgroupMount is where the cgroup filesystems are mounted.
const cgroupMount = "/sys/fs/cgroup"

// nodeResources measures the node, computes what pods may use, and, with
// cgroupsPerQOS, sets up the pod cgroup tree. Reservations larger than the
// node stop start-up here, naming the field.
func nodeResources(cfg *config.Config, log *slog.Logger) (capacity, allocatable v1.ResourceList, _ *hierarchy.Hierarchy, _ error) {
	r := cfg.Resources
	capacity, err := cm.MachineCapacity(cm.MachineFiles{}, cfg.RootDir, cfg.MaxPods)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("node capacity: %w", err)
	}
	allocatable, err = cm.Allocatable(capacity, r.KubeReserved, r.SystemReserved, cfg.Eviction.Hard)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("node allocatable: %w", err)
	}
	log.Info("node resources", "capacity", resourceSummary(capacity), "allocatable", resourceSummary(allocatable))
	if !r.CgroupsPerQOS {
		return capacity, allocatable, nil, nil
	}
	w, err := cgroupfs.New(cgroupMount)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cgroups: %w", err)
	}
	h := hierarchy.New(w, hierarchy.Options{
		CgroupRoot: r.CgroupRoot,
		// The cgroups are sized without the eviction threshold, as the
		// kubelet's are: eviction, not the kernel, guards that margin.
		Allocatable:          cm.NodeAllocatableAbsolute(capacity, r.KubeReserved, r.SystemReserved),
		EnforcePods:          r.EnforcesPods(),
		MemoryReservePercent: r.QOSReservedMemoryPercent,
		PodPidsLimit:         r.PodPidsLimit,
		HugePageSizes:        w.HugePageSizes(),
	}, log)
	if err := h.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("pod cgroups: %w", err)
	}
	log.Info("pod cgroups ready", "kubepods", cm.KubepodsCgroup(r.CgroupRoot).ToCgroupfs(), "cgroupVersion", w.Version())
	return capacity, allocatable, h, nil
}

func resourceSummary(l v1.ResourceList) string {
	return fmt.Sprintf("cpu=%s memory=%s pods=%s", l.Cpu(), l.Memory(), l.Pods())
}
