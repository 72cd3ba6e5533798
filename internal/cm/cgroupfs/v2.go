package cgroupfs

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/internal/cm"
)

// NewV2 uses the unified cgroup2 tree at root. The controllers it can set
// are the ones root's cgroup.controllers lists.
func NewV2(root string) (*Manager, error) {
	s, err := readString(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s: %w", root, err)
	}
	m := &Manager{version: 2, root: root, hierarchies: []string{root}, controllers: map[string]string{}}
	for _, c := range strings.Fields(s) {
		m.controllers[c] = root
	}
	return m, nil
}

// createV2 enables berth's controllers in each ancestor's subtree_control
// before making the child, since a child only gets a controller's files
// (cpu.max, memory.max, ...) when its parent delegates that controller. The
// kernel ignores enabling what is already enabled, so this is idempotent.
// The cgroup's own subtree_control is left to runc, which enables what the
// containers below it need.
func (m *Manager) createV2(p string) error {
	var enable []string
	for _, c := range []string{"cpu", "memory", "pids", "hugetlb"} {
		if m.controllers[c] != "" {
			enable = append(enable, "+"+c)
		}
	}
	parent := m.root
	for _, level := range levels(p) {
		if len(enable) > 0 {
			if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), strings.Join(enable, " ")); err != nil {
				return err
			}
		}
		dir := filepath.Join(m.root, level)
		if err := mkdir(dir); err != nil {
			return err
		}
		parent = dir
	}
	return nil
}

func (m *Manager) updateV2(p string, cfg cm.ResourceConfig) error {
	dir := filepath.Join(m.root, p)
	if cfg.CPUShares != nil {
		w := cm.SharesToWeight(*cfg.CPUShares)
		if err := writeFile(filepath.Join(dir, "cpu.weight"), strconv.FormatUint(w, 10)); err != nil {
			return err
		}
	}
	if cfg.CPUQuota != nil || cfg.CPUPeriod != nil {
		if err := setCPUMax(filepath.Join(dir, "cpu.max"), cfg.CPUQuota, cfg.CPUPeriod); err != nil {
			return err
		}
	}
	if cfg.Memory != nil {
		if err := writeFile(filepath.Join(dir, "memory.max"), formatMax(*cfg.Memory)); err != nil {
			return err
		}
	}
	if cfg.PidsLimit != nil {
		if err := writeFile(filepath.Join(dir, "pids.max"), formatMax(*cfg.PidsLimit)); err != nil {
			return err
		}
	}
	return nil
}

// setCPUMax writes "<quota> <period>" in one write (v2 has no ordering
// problem), keeping the current value of whichever half cfg leaves nil.
func setCPUMax(file string, quota *int64, period *uint64) error {
	var q, per string
	if quota == nil || period == nil {
		cur, err := readString(file)
		if err != nil {
			return err
		}
		f := strings.Fields(cur)
		if len(f) != 2 {
			return fmt.Errorf("read %s: %q is not \"<quota> <period>\"", file, cur)
		}
		q, per = f[0], f[1]
	}
	if quota != nil {
		q = formatMax(*quota)
	}
	if period != nil {
		per = strconv.FormatUint(*period, 10)
	}
	return writeFile(file, q+" "+per)
}

func (m *Manager) readV2(p string) (cm.ResourceConfig, error) {
	var cfg cm.ResourceConfig
	dir := filepath.Join(m.root, p)
	if m.controllers["cpu"] != "" {
		w, err := readUint64(filepath.Join(dir, "cpu.weight"))
		if err != nil {
			return cfg, err
		}
		shares := weightToShares(w)
		file := filepath.Join(dir, "cpu.max")
		s, err := readString(file)
		if err != nil {
			return cfg, err
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return cfg, fmt.Errorf("read %s: %q is not \"<quota> <period>\"", file, s)
		}
		quota, err := parseMax(file, f[0])
		if err != nil {
			return cfg, err
		}
		period, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return cfg, fmt.Errorf("read %s: %w", file, err)
		}
		cfg.CPUShares, cfg.CPUQuota, cfg.CPUPeriod = &shares, &quota, &period
	}
	if m.controllers["memory"] != "" {
		limit, err := readMaxInt64(filepath.Join(dir, "memory.max"))
		if err != nil {
			return cfg, err
		}
		cfg.Memory = &limit
	}
	if m.controllers["pids"] != "" {
		limit, err := readMaxInt64(filepath.Join(dir, "pids.max"))
		if err != nil {
			return cfg, err
		}
		cfg.PidsLimit = &limit
	}
	return cfg, nil
}

// weightToShares inverts cm.SharesToWeight, which is many-to-one: it returns
// the smallest shares value with that weight, so that writing back what Read
// returned leaves cpu.weight as it was.
func weightToShares(w uint64) uint64 {
	w = min(max(w, 1), 10000)
	return cm.MinShares + ((w-1)*(cm.MaxShares-cm.MinShares)+9998)/9999
}
