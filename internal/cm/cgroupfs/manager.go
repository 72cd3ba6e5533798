// Package cgroupfs creates, configures and removes cgroups through the cgroup
// filesystem, on cgroup v1 (one hierarchy per controller) and v2 (one unified
// tree). berth owns the kubelet's kubepods tree itself because runc creates
// missing parent cgroups with default values and never removes them.
package cgroupfs

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/cm"
)

// Manager creates, configures and removes cgroups by their cgroupfs path
// (e.g. "/kubepods/burstable/pod<uid>"). It keeps no state about the cgroups
// themselves: the filesystem is the only truth, so a restarted berth sees
// exactly what the kernel has.
type Manager struct {
	version int
	root    string
	// hierarchies are the directories under which every cgroup has a copy:
	// on v1 every mounted hierarchy (runc joins them all, so Destroy must
	// remove them all), on v2 the root alone.
	hierarchies []string
	// unified is, on a hybrid host, the cgroup2 mount beside the v1
	// hierarchies (mountRoot/unified). berth creates nothing there, but
	// runc puts each container's cgroup there too, under the pod's path,
	// so a pod's cgroup is removed from it as well (libcontainer's fs
	// manager, which the kubelet uses, removes that path with the others).
	unified string
	// controllers maps a controller (cpu, cpuset, memory, pids, ...) to the
	// hierarchy that holds its files. A controller the host lacks is absent.
	controllers map[string]string
	// hugePageSizes are the host's huge page sizes in bytes.
	hugePageSizes []int64
}

// New detects the cgroup mode under mountRoot (normally "/sys/fs/cgroup"):
// unified v2 when mountRoot is a cgroup2 mount or has cgroup.controllers,
// v1 when its directories are cgroup v1 hierarchies. A hybrid host, with
// cgroup2 mounted at mountRoot/unified beside the v1 hierarchies, is v1:
// the controllers are all on the v1 side.
func New(mountRoot string) (*Manager, error) {
	m, err := detect(mountRoot)
	if err != nil {
		return nil, err
	}
	sizes, err := cm.HugePageSizes("")
	if err != nil {
		return nil, err
	}
	return m.WithHugePageSizes(sizes), nil
}

func detect(mountRoot string) (*Manager, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mountRoot, &st); err != nil {
		return nil, fmt.Errorf("detect cgroup mode: statfs %s: %w", mountRoot, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return NewV2(mountRoot)
	}
	if _, err := os.Stat(filepath.Join(mountRoot, "cgroup.controllers")); err == nil {
		return NewV2(mountRoot)
	}
	return newV1(mountRoot, true)
}

// SwapControlFile is the file whose presence says that swap can be limited
// per cgroup, where the kubelet looks (checkSwapControllerAvailability):
// the root's memory.memsw.limit_in_bytes on v1; on v2, where the root has
// no memory.swap.max, the one of the cgroup berth runs in (self, from
// /proc/self/cgroup's "0::" line).
func (m *Manager) SwapControlFile(self string) string {
	if m.version == 1 {
		return filepath.Join(m.controllers["memory"], "memory.memsw.limit_in_bytes")
	}
	return filepath.Join(m.root, self, "memory.swap.max")
}

// Version is 1 or 2.
func (m *Manager) Version() int { return m.version }

// Create makes the cgroup, and any missing parent, in every hierarchy and
// writes cfg to it. It is idempotent, and repairs a cgroup that exists in
// only some hierarchies.
func (m *Manager) Create(p string, cfg cm.ResourceConfig) error {
	if err := m.checkWrite(p, cfg); err != nil {
		return err
	}
	var err error
	if m.version == 1 {
		err = m.createV1(p)
	} else {
		err = m.createV2(p)
	}
	if err != nil {
		return fmt.Errorf("create cgroup %s: %w", p, err)
	}
	return m.update(p, cfg)
}

// Update writes cfg's non-nil fields to an existing cgroup. A rejected write
// wraps the kernel's errno: errors.Is(err, unix.EBUSY) is how a caller sees
// that v1 refused a memory limit below the cgroup's usage.
func (m *Manager) Update(p string, cfg cm.ResourceConfig) error {
	if err := m.checkWrite(p, cfg); err != nil {
		return err
	}
	return m.update(p, cfg)
}

func (m *Manager) update(p string, cfg cm.ResourceConfig) error {
	var err error
	if m.version == 1 {
		err = m.updateV1(p, cfg)
	} else {
		err = m.updateV2(p, cfg)
	}
	if err == nil {
		err = m.setHugetlb(p, cfg.HugePageLimit)
	}
	if err != nil {
		return fmt.Errorf("update cgroup %s: %w", p, err)
	}
	return nil
}

// Read returns the values in the cgroup's files, unlimited as -1. Fields of
// controllers the host lacks are nil.
func (m *Manager) Read(p string) (cm.ResourceConfig, error) {
	if err := checkPath(p); err != nil {
		return cm.ResourceConfig{}, err
	}
	var cfg cm.ResourceConfig
	var err error
	if m.version == 1 {
		cfg, err = m.readV1(p)
	} else {
		cfg, err = m.readV2(p)
	}
	if err != nil {
		return cm.ResourceConfig{}, fmt.Errorf("read cgroup %s: %w", p, err)
	}
	return cfg, nil
}

// Exists reports whether the cgroup exists in every hierarchy: one that
// exists in only some of them is not ready for a container, and Create
// completes it.
func (m *Manager) Exists(p string) bool {
	if checkPath(p) != nil {
		return false
	}
	for _, h := range m.hierarchies {
		if fi, err := os.Stat(filepath.Join(h, p)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// Destroy removes the cgroup and its descendants in every hierarchy. A
// cgroup that still has processes is left whole and the error names it and
// them (wrapping EBUSY); a cgroup that does not exist is already destroyed.
// The kernel may hold a cgroup busy for a moment after its last process
// is reaped; the caller's next sync retries.
func (m *Manager) Destroy(p string) error {
	if err := checkNotRoot(p); err != nil {
		return err
	}
	pids, err := m.Pids(p)
	if err != nil {
		return fmt.Errorf("destroy cgroup %s: %w", p, err)
	}
	if len(pids) > 0 {
		return fmt.Errorf("destroy cgroup %s: it still has processes %v: %w", p, pids, unix.EBUSY)
	}
	var errs []error
	for _, h := range m.withUnified() {
		if err := removeTree(filepath.Join(h, p)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("destroy cgroup %s: %w", p, err)
	}
	return nil
}

// withUnified is the hierarchies and, on a hybrid host, the cgroup2 mount:
// everywhere a cgroup may have a copy that holds processes.
func (m *Manager) withUnified() []string {
	if m.unified == "" {
		return m.hierarchies
	}
	return append(slices.Clip(m.hierarchies), m.unified)
}

// Children lists the names of the cgroup's direct children, sorted: from the
// cpu hierarchy on v1, where every pod cgroup berth creates has a copy.
func (m *Manager) Children(p string) ([]string, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	h := m.root
	if m.version == 1 {
		h = m.controllers["cpu"]
	}
	return subdirs(filepath.Join(h, p))
}

// Pids lists, sorted, the processes in the cgroup and its descendants, in
// any hierarchy: a process that joined only some of them still holds the
// cgroup.
func (m *Manager) Pids(p string) ([]int, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	set := map[int]struct{}{}
	for _, h := range m.withUnified() {
		if err := collectProcs(filepath.Join(h, p), set); err != nil {
			return nil, err
		}
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// MemoryUsage returns the cgroup's memory usage in bytes.
func (m *Manager) MemoryUsage(p string) (int64, error) {
	if err := checkPath(p); err != nil {
		return 0, err
	}
	h := m.controllers["memory"]
	if h == "" {
		return 0, fmt.Errorf("memory usage of cgroup %s: %s has no memory controller", p, m.root)
	}
	file := "memory.current"
	if m.version == 1 {
		file = "memory.usage_in_bytes"
	}
	return readInt64(filepath.Join(h, p, file))
}

// checkWrite refuses, before anything is touched, a path berth must not
// write to and a config the host cannot apply: silently dropping a limit
// because its controller is missing would leave a pod unbounded.
func (m *Manager) checkWrite(p string, cfg cm.ResourceConfig) error {
	if err := checkNotRoot(p); err != nil {
		return err
	}
	var errs []error
	need := func(set bool, field, controller string) {
		if set && m.controllers[controller] == "" {
			errs = append(errs, fmt.Errorf("%s needs the %s controller, which %s does not have", field, controller, m.root))
		}
	}
	need(cfg.CPUShares != nil, "CPUShares", "cpu")
	need(cfg.CPUQuota != nil, "CPUQuota", "cpu")
	need(cfg.CPUPeriod != nil, "CPUPeriod", "cpu")
	need(cfg.Memory != nil, "Memory", "memory")
	need(cfg.PidsLimit != nil, "PidsLimit", "pids")
	limit := func(v *int64, field string, min int64) {
		if v != nil && *v != -1 && *v < min {
			errs = append(errs, fmt.Errorf("%s %d: must be -1 (unlimited) or at least %d", field, *v, min))
		}
	}
	limit(cfg.CPUQuota, "CPUQuota", 1)
	limit(cfg.Memory, "Memory", 0)
	limit(cfg.PidsLimit, "PidsLimit", 0)
	if cfg.CPUPeriod != nil && *cfg.CPUPeriod == 0 {
		errs = append(errs, errors.New("CPUPeriod 0: must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup %s: %w", p, err)
	}
	return nil
}

// checkPath accepts an absolute, clean cgroupfs path: nothing that could
// climb out of the hierarchy.
func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Errorf("cgroup path %q: must be absolute and clean, like /kubepods/burstable", p)
	}
	return nil
}

func checkNotRoot(p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if p == "/" {
		return errors.New("cgroup path /: the root cgroup belongs to the host, not to berth")
	}
	return nil
}

// levels lists a path and its ancestors below the root, outermost first:
// "/a/b/c" gives "/a", "/a/b", "/a/b/c".
func levels(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}
