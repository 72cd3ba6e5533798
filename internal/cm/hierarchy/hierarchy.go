// Package hierarchy owns the node's pod cgroup tree, the kubelet's
// kubepods / QoS class / pod<UID> layout: it creates kubepods and the
// burstable and besteffort cgroups, a cgroup per pod before its sandbox,
// keeps the QoS cgroups' values right as pods come and go, and removes
// the cgroups of pods that are gone. The values themselves are pure
// functions in package cm; this package is where they meet the cgroupfs.
package hierarchy

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/cm"
)

// Writer is the cgroupfs, as the hierarchy uses it; *cgroupfs.Manager
// implements it for cgroup v1 and v2.
type Writer interface {
	Create(path string, cfg cm.ResourceConfig) error
	Update(path string, cfg cm.ResourceConfig) error
	Destroy(path string) error
	Exists(path string) bool
	Children(path string) ([]string, error)
	Pids(path string) ([]int, error)
	MemoryUsage(path string) (int64, error)
}

// Options are the node's resource settings.
type Options struct {
	CgroupRoot  string
	Allocatable v1.ResourceList
	// EnforcePods limits kubepods to allocatable.
	EnforcePods bool
	// MemoryReservePercent is qosReserved memory, nil when unset.
	MemoryReservePercent *int64
	// PodPidsLimit is every pod cgroup's pids.max; -1 for none.
	PodPidsLimit int64
}

// Hierarchy is the single owner of the pod cgroup tree.
type Hierarchy struct {
	w        Writer
	opts     Options
	log      *slog.Logger
	kubepods cm.CgroupName

	mu sync.Mutex
	// pods are the pods that have, or are about to get, a cgroup: the ones
	// the QoS cgroups' values are computed from.
	pods map[types.UID]*v1.Pod
	// known is set once the pod set is known (after the first manifest
	// snapshot): before it, QoS values computed from an empty set would
	// loosen the limits of pods already running.
	known bool
}

// New returns the hierarchy under opts.CgroupRoot.
func New(w Writer, opts Options, log *slog.Logger) *Hierarchy {
	return &Hierarchy{
		w: w, opts: opts, log: log,
		kubepods: cm.KubepodsCgroup(opts.CgroupRoot),
		pods:     map[types.UID]*v1.Pod{},
	}
}

// Start creates kubepods and the QoS cgroups. kubepods gets its values at
// once; existing QoS cgroups keep theirs until the pod set is known, so a
// restart of berth never loosens the limits of running pods.
func (h *Hierarchy) Start() error {
	if err := h.w.Create(h.kubepods.ToCgroupfs(), cm.KubepodsConfig(h.opts.Allocatable, h.opts.EnforcePods)); err != nil {
		return fmt.Errorf("kubepods cgroup: %w", err)
	}
	for _, class := range []v1.PodQOSClass{v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		path := cm.QOSCgroup(h.kubepods, class).ToCgroupfs()
		if h.w.Exists(path) {
			continue
		}
		burstable, besteffort := cm.QOSConfigs(nil, h.allocatableMemory(), h.opts.MemoryReservePercent)
		cfg := burstable
		if class == v1.PodQOSBestEffort {
			cfg = besteffort
		}
		if err := h.w.Create(path, cfg); err != nil {
			return fmt.Errorf("%s QoS cgroup: %w", class, err)
		}
	}
	return nil
}

// SetPods tells the hierarchy which pods the node wants now, and brings the
// QoS cgroups' values in line. A wanted pod counts once its cgroup exists
// (EnsurePod, or found on disk after a restart), so room is never reserved
// for a pod before it is there; a pod no longer wanted stops counting.
func (h *Hierarchy) SetPods(pods []*v1.Pod) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := make(map[types.UID]*v1.Pod, len(pods))
	for _, p := range pods {
		if _, ok := h.pods[p.UID]; ok || h.w.Exists(h.CgroupParent(p)) {
			next[p.UID] = p
		}
	}
	h.pods, h.known = next, true
	return h.updateQOSLocked()
}

// CgroupParent is the cgroupfs path of the pod's cgroup, the CgroupParent
// of its sandbox.
func (h *Hierarchy) CgroupParent(pod *v1.Pod) string {
	return cm.PodCgroup(h.kubepods, pod).ToCgroupfs()
}

// EnsurePod creates (or updates) the pod's cgroup with its values, then
// tightens the QoS cgroups for it: the room is reserved only once the pod
// that needs it exists. It returns the pod's cgroup path.
func (h *Hierarchy) EnsurePod(pod *v1.Pod) (string, error) {
	path := h.CgroupParent(pod)
	if err := h.w.Create(path, cm.PodResourceConfig(pod, h.opts.PodPidsLimit)); err != nil {
		return "", fmt.Errorf("pod cgroup: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[pod.UID] = pod
	return path, h.updateQOSLocked()
}

// RemovePod removes the pod's cgroup, which must have no processes left,
// and gives the room it reserved back to the lower QoS classes.
func (h *Hierarchy) RemovePod(uid types.UID) error {
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		path := cm.NewCgroupName(cm.QOSCgroup(h.kubepods, class), "pod"+string(uid)).ToCgroupfs()
		if err := h.w.Destroy(path); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove cgroup of pod %s: %w", uid, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pods, uid)
	return h.updateQOSLocked()
}

// Housekeep removes the cgroups of pods that wanted(uid) says are gone,
// once they have no processes left (the kubelet's orphaned pod cgroup
// cleanup). It returns the UIDs it removed.
func (h *Hierarchy) Housekeep(wanted func(types.UID) bool) ([]types.UID, error) {
	var removed []types.UID
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		parent := cm.QOSCgroup(h.kubepods, class)
		children, err := h.w.Children(parent.ToCgroupfs())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, child := range children {
			uid, ok := cm.PodUIDFromCgroup(child)
			if !ok || wanted(uid) {
				continue
			}
			path := cm.NewCgroupName(parent, child).ToCgroupfs()
			if pids, err := h.w.Pids(path); err != nil || len(pids) > 0 {
				continue // its processes are still being stopped
			}
			if err := h.w.Destroy(path); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, uid)
		}
	}
	return removed, errors.Join(errs...)
}

// updateQOSLocked writes the burstable and besteffort values for the
// current pod set. A memory limit the kernel refuses because the class
// already uses more is set to that usage instead, and said so: lowering it
// further would OOM-kill running pods.
func (h *Hierarchy) updateQOSLocked() error {
	if !h.known {
		return nil
	}
	pods := make([]*v1.Pod, 0, len(h.pods))
	for _, p := range h.pods {
		pods = append(pods, p)
	}
	burstable, besteffort := cm.QOSConfigs(pods, h.allocatableMemory(), h.opts.MemoryReservePercent)
	var errs []error
	for _, q := range []struct {
		class v1.PodQOSClass
		cfg   cm.ResourceConfig
	}{{v1.PodQOSBurstable, burstable}, {v1.PodQOSBestEffort, besteffort}} {
		path := cm.QOSCgroup(h.kubepods, q.class).ToCgroupfs()
		err := h.w.Update(path, q.cfg)
		if err != nil && q.cfg.Memory != nil && *q.cfg.Memory >= 0 {
			usage, uerr := h.w.MemoryUsage(path)
			if uerr == nil && usage > *q.cfg.Memory {
				h.log.Warn("QoS memory limit would be below what the class uses; holding it at the usage until pods release memory",
					"class", q.class, "wanted", *q.cfg.Memory, "usage", usage)
				held := q.cfg
				held.Memory = &usage
				err = h.w.Update(path, held)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s QoS cgroup: %w", q.class, err))
		}
	}
	return errors.Join(errs...)
}

func (h *Hierarchy) allocatableMemory() int64 {
	return h.opts.Allocatable.Memory().Value()
}
