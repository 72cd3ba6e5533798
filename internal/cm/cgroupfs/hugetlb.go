package cgroupfs

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/berth-dev/berth/internal/cm"
)

// WithHugePageSizes sets the huge page sizes, in bytes, that the host has:
// the ones a ResourceConfig's HugePageLimit leaves out are limited to 0.
// New reads them from the host; NewV1 and NewV2 start with none.
func (m *Manager) WithHugePageSizes(sizes []int64) *Manager {
	m.hugePageSizes = slices.Clone(sizes)
	return m
}

// hugetlbLimits is what to write for limits: every given size, and 0 for
// each other size the host has, by the unit name of the cgroup files
// ("2MB"), sorted so that writes happen in a stable order.
func (m *Manager) hugetlbLimits(limits map[int64]int64) ([]hugetlbLimit, error) {
	all := maps.Clone(limits)
	for _, size := range m.hugePageSizes {
		if _, ok := all[size]; !ok {
			all[size] = 0
		}
	}
	out := make([]hugetlbLimit, 0, len(all))
	for _, size := range slices.Sorted(maps.Keys(all)) {
		unit, err := cm.HugePageUnitSize(size)
		if err != nil {
			return nil, err
		}
		if all[size] < 0 {
			return nil, fmt.Errorf("huge page limit for %s pages: %d: must not be negative", unit, all[size])
		}
		out = append(out, hugetlbLimit{unit: unit, limit: all[size]})
	}
	return out, nil
}

type hugetlbLimit struct {
	unit  string
	limit int64
}

// setHugetlb writes the hugetlb limits of the cgroup at p, if the host has
// the hugetlb controller (v1: a hugetlb hierarchy; v2: hugetlb in
// cgroup.controllers). Without it nothing is written, as the kubelet skips
// an optional controller the host lacks.
func (m *Manager) setHugetlb(p string, limits map[int64]int64) error {
	h := m.controllers["hugetlb"]
	if limits == nil || h == "" {
		return nil
	}
	all, err := m.hugetlbLimits(limits)
	if err != nil {
		return err
	}
	suffix := "max"
	if m.version == 1 {
		suffix = "limit_in_bytes"
	}
	for _, l := range all {
		file := filepath.Join(h, p, "hugetlb."+l.unit+"."+suffix)
		if err := writeFile(file, strconv.FormatInt(l.limit, 10)); err != nil {
			return err
		}
	}
	return nil
}

// HugePageSizes are the host's huge page sizes in bytes.
func (m *Manager) HugePageSizes() []int64 { return slices.Clone(m.hugePageSizes) }
