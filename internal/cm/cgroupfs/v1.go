package cgroupfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/cm"
)

// NewV1 uses the cgroup v1 hierarchies under mountRoot: every subdirectory
// (but a cgroup2 mount) is one, and its name lists its controllers, the way
// hosts mount them ("memory", "cpu,cpuacct", "systemd"). Symlinks such as
// "cpu" -> "cpu,cpuacct" are aliases, not hierarchies.
func NewV1(mountRoot string) (*Manager, error) {
	return newV1(mountRoot, false)
}

// newV1 with mountsOnly keeps only real cgroup v1 mounts: what New uses on a
// host, where a stray directory must not be mistaken for a hierarchy.
func newV1(mountRoot string, mountsOnly bool) (*Manager, error) {
	entries, err := os.ReadDir(mountRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup v1 hierarchies: %w", err)
	}
	m := &Manager{version: 1, root: mountRoot, controllers: map[string]string{}}
	var found []string
	for _, e := range entries {
		dir := filepath.Join(mountRoot, e.Name())
		if !e.IsDir() {
			continue // files, and the "cpu" -> "cpu,cpuacct" style aliases
		}
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return nil, fmt.Errorf("cgroup v1 hierarchies: statfs %s: %w", dir, err)
		}
		switch {
		case st.Type == unix.CGROUP2_SUPER_MAGIC:
			found = append(found, e.Name()+" (cgroup2)")
			m.unified = dir
			continue
		case mountsOnly && st.Type != unix.CGROUP_SUPER_MAGIC:
			found = append(found, fmt.Sprintf("%s (filesystem magic %#x)", e.Name(), st.Type))
			continue
		}
		found = append(found, e.Name())
		m.hierarchies = append(m.hierarchies, dir)
		for _, c := range strings.Split(e.Name(), ",") {
			m.controllers[c] = dir
		}
	}
	if m.controllers["cpu"] == "" {
		return nil, fmt.Errorf("%s is neither cgroup2 nor a set of cgroup v1 hierarchies with a cpu controller; found [%s]",
			mountRoot, strings.Join(found, ", "))
	}
	return m, nil
}

func (m *Manager) createV1(p string) error {
	cpuset := m.controllers["cpuset"]
	for _, h := range m.hierarchies {
		parent := h
		for _, level := range levels(p) {
			dir := filepath.Join(h, level)
			if err := mkdir(dir); err != nil {
				return err
			}
			if h == cpuset {
				if err := inheritCpuset(dir, parent); err != nil {
					return err
				}
			}
			parent = dir
		}
	}
	return nil
}

// inheritCpuset copies the parent's cpus and mems into a v1 cpuset that has
// none: a new cpuset starts empty, and the kernel refuses to attach any task
// to it (ENOSPC) until both are set, which fails every container in it.
func inheritCpuset(dir, parent string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, err := readString(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if cur != "" {
			continue
		}
		v, err := readString(filepath.Join(parent, f))
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, f), v); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) updateV1(p string, cfg cm.ResourceConfig) error {
	if cfg.CPUShares != nil {
		file := filepath.Join(m.controllers["cpu"], p, "cpu.shares")
		if err := writeFile(file, strconv.FormatUint(*cfg.CPUShares, 10)); err != nil {
			return err
		}
	}
	if cfg.CPUQuota != nil || cfg.CPUPeriod != nil {
		if err := setCFS(filepath.Join(m.controllers["cpu"], p), cfg.CPUQuota, cfg.CPUPeriod); err != nil {
			return err
		}
	}
	if cfg.Memory != nil {
		// v1 takes -1 as "no limit" here; it is pids.max that wants "max".
		file := filepath.Join(m.controllers["memory"], p, "memory.limit_in_bytes")
		if err := writeFile(file, strconv.FormatInt(*cfg.Memory, 10)); err != nil {
			return err
		}
	}
	if cfg.PidsLimit != nil {
		file := filepath.Join(m.controllers["pids"], p, "pids.max")
		if err := writeFile(file, formatMax(*cfg.PidsLimit)); err != nil {
			return err
		}
	}
	return nil
}

// setCFS writes the CFS bandwidth. The kernel checks quota/period against
// the parent's bandwidth at each of the two writes, so the order matters:
// going from 50000/100000 to 25000/50000 under a parent capped at half a
// CPU, writing the period first passes through 50000/50000 and is refused
// (EINVAL), while writing the quota first passes through 25000/100000.
func setCFS(dir string, quota *int64, period *uint64) error {
	writeQuota := func() error {
		return writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(*quota, 10))
	}
	writePeriod := func() error {
		return writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatUint(*period, 10))
	}
	switch {
	case period == nil:
		return writeQuota()
	case quota == nil:
		return writePeriod()
	}
	err := writePeriod()
	if errors.Is(err, unix.EINVAL) {
		if err := writeQuota(); err != nil {
			return err
		}
		return writePeriod()
	}
	if err != nil {
		return err
	}
	return writeQuota()
}

func (m *Manager) readV1(p string) (cm.ResourceConfig, error) {
	var cfg cm.ResourceConfig
	if h := m.controllers["cpu"]; h != "" {
		dir := filepath.Join(h, p)
		shares, err := readUint64(filepath.Join(dir, "cpu.shares"))
		if err != nil {
			return cfg, err
		}
		quota, err := readInt64(filepath.Join(dir, "cpu.cfs_quota_us"))
		if err != nil {
			return cfg, err
		}
		period, err := readUint64(filepath.Join(dir, "cpu.cfs_period_us"))
		if err != nil {
			return cfg, err
		}
		cfg.CPUShares, cfg.CPUQuota, cfg.CPUPeriod = &shares, &quota, &period
	}
	if h := m.controllers["memory"]; h != "" {
		limit, err := readInt64(filepath.Join(h, p, "memory.limit_in_bytes"))
		if err != nil {
			return cfg, err
		}
		if limit >= v1UnlimitedMemory() {
			limit = -1
		}
		cfg.Memory = &limit
	}
	if h := m.controllers["pids"]; h != "" {
		limit, err := readMaxInt64(filepath.Join(h, p, "pids.max"))
		if err != nil {
			return cfg, err
		}
		cfg.PidsLimit = &limit
	}
	return cfg, nil
}
