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
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

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
	// Kill sends SIGKILL to every process of the cgroup and its
	// descendants, and returns their pids; it does not wait for them.
	Kill(path string) ([]int, error)
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
	// HugePageSizes are the host's huge page sizes in bytes, which the QoS
	// cgroups leave unbounded.
	HugePageSizes []int64
	// Clock paces the waits for killed processes to go; nil is the real
	// clock.
	Clock clock.Clock
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
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
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
		unbounded := cm.QOSHugePageLimits(h.opts.HugePageSizes)
		if h.w.Exists(path) {
			// Only hugetlb, which no pod set changes, is set at once.
			if err := h.w.Update(path, cm.ResourceConfig{HugePageLimit: unbounded}); err != nil {
				return fmt.Errorf("%s QoS cgroup: %w", class, err)
			}
			continue
		}
		burstable, besteffort := cm.QOSConfigs(nil, h.allocatableMemory(), h.opts.MemoryReservePercent)
		cfg := burstable
		if class == v1.PodQOSBestEffort {
			cfg = besteffort
		}
		cfg.HugePageLimit = unbounded
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

// RemovePod removes the pod's cgroup and gives the room it reserved back to
// the lower QoS classes. Its containers are stopped by then, so whatever
// is still in the cgroup is a straggler (a process a container left
// behind, or one moved in from outside): it is killed, as the kubelet's
// pod cgroup manager does, and its pids are returned so that the caller
// can say so on the pod. Left alive, it would keep the pod from ever
// going.
func (h *Hierarchy) RemovePod(uid types.UID) (killed []int, _ error) {
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		path := cm.NewCgroupName(cm.QOSCgroup(h.kubepods, class), "pod"+string(uid)).ToCgroupfs()
		pids, err := h.destroy(path)
		killed = append(killed, pids...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return killed, fmt.Errorf("remove cgroup of pod %s: %w", uid, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pods, uid)
	return killed, h.updateQOSLocked()
}

// Housekeep removes the cgroups of pods that wanted(uid) says are gone
// (the kubelet's orphaned pod cgroup cleanup), killing what is left in
// them as the kubelet does. It returns the UIDs it removed.
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
			if _, err := h.destroy(cm.NewCgroupName(parent, child).ToCgroupfs()); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, uid)
		}
	}
	return removed, errors.Join(errs...)
}

// Killing the stragglers of a cgroup goes in rounds: kill what is there,
// then wait for the kernel to let the cgroup go, polling at a doubling
// interval. A process that survives a round (it forked past a missing
// freezer, or sat in uninterruptible sleep) is killed again next round.
// The whole takes at most about killRounds*killRoundWait; past it the
// caller's own retry (the pod worker's next sync) starts again.
const (
	killRounds    = 3
	killRoundWait = time.Second
	killFirstPoll = 10 * time.Millisecond
)

// destroy removes the cgroup at path, first killing any process left in
// it. It returns the pids it killed.
func (h *Hierarchy) destroy(path string) ([]int, error) {
	err := h.w.Destroy(path)
	if err == nil || !errors.Is(err, unix.EBUSY) {
		return nil, err
	}
	killed := map[int]struct{}{}
	for round := 0; round < killRounds; round++ {
		pids, kerr := h.w.Kill(path)
		for _, pid := range pids {
			killed[pid] = struct{}{}
		}
		if len(pids) > 0 {
			h.log.Warn("killed processes left in a pod cgroup", "cgroup", path, "pids", pids, "round", round+1)
		}
		if err = h.awaitDestroy(path); err == nil {
			break
		}
		if kerr != nil {
			err = errors.Join(err, kerr)
		}
	}
	return slices.Sorted(maps.Keys(killed)), err
}

// awaitDestroy tries Destroy until it succeeds or killRoundWait has passed
// on the clock; only a busy cgroup is worth waiting for.
func (h *Hierarchy) awaitDestroy(path string) error {
	deadline := h.opts.Clock.Now().Add(killRoundWait)
	for wait := killFirstPoll; ; wait *= 2 {
		<-h.opts.Clock.After(wait)
		err := h.w.Destroy(path)
		if err == nil || !errors.Is(err, unix.EBUSY) || !h.opts.Clock.Now().Before(deadline) {
			return err
		}
	}
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

// ResizePod writes cfg, the values an in-place resize changes, to the pod's
// cgroup, and counts the pod's new resources in the QoS cgroups (the
// kubelet updates them after a resize too).
func (h *Hierarchy) ResizePod(pod *v1.Pod, cfg cm.ResourceConfig) error {
	if err := h.w.Update(h.CgroupParent(pod), cfg); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[pod.UID] = pod
	return h.updateQOSLocked()
}

// MemoryUsage is the memory the pod's cgroup uses, or with a container ID
// the container's (runc puts it in <pod cgroup>/<id> under cgroupfs).
func (h *Hierarchy) MemoryUsage(pod *v1.Pod, containerID string) (int64, error) {
	p := h.CgroupParent(pod)
	if containerID != "" {
		p += "/" + containerID
	}
	return h.w.MemoryUsage(p)
}
