package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/internal/cm"
)

const (
	page2M = int64(2 << 20)
	page1G = int64(1 << 30)
)

// The kubelet's maybeSetHugetlb: the sizes asked for get their limits, the
// host's other sizes 0; v1 names the file limit_in_bytes, v2 max.
func TestHugetlbLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits map[int64]int64
		want   map[string]string // file -> content
	}{
		{"nil leaves hugetlb alone", nil, map[string]string{"2MB": "untouched", "1GB": "untouched"}},
		{"none asked: every size 0", map[int64]int64{}, map[string]string{"2MB": "0", "1GB": "0"}},
		{"2Mi asked", map[int64]int64{page2M: 8 << 20}, map[string]string{"2MB": "8388608", "1GB": "0"}},
		{"QoS unbounded", cm.QOSHugePageLimits([]int64{page2M, page1G}), map[string]string{"2MB": "4611686018427387904", "1GB": "4611686018427387904"}},
	} {
		for _, version := range []int{1, 2} {
			t.Run(tc.name+"/v"+string(rune('0'+version)), func(t *testing.T) {
				m, dir, suffix := hugetlbFixture(t, version)
				if err := m.Update(pod, cm.ResourceConfig{HugePageLimit: tc.limits}); err != nil {
					t.Fatal(err)
				}
				for unit, want := range tc.want {
					if got := content(t, filepath.Join(dir, "hugetlb."+unit+"."+suffix)); got != want {
						t.Errorf("hugetlb.%s.%s = %q, want %q", unit, suffix, got, want)
					}
				}
			})
		}
	}
}

// A host without the hugetlb controller (this hybrid host's v1 side) gets
// no hugetlb writes and no error: the kubelet treats hugetlb as optional.
func TestHugetlbWithoutController(t *testing.T) {
	root := fakeCgroup2(t, "cpu memory pids", pod)
	m, err := NewV2(root)
	if err != nil {
		t.Fatal(err)
	}
	m.WithHugePageSizes([]int64{page2M})
	if err := m.Update(pod, cm.ResourceConfig{HugePageLimit: map[int64]int64{page2M: 2 << 20}}); err != nil {
		t.Fatalf("Update without hugetlb = %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(root, pod, "hugetlb.2MB.max")); err == nil {
		t.Error("hugetlb.2MB.max written on a host without the controller")
	}
}

func TestHugetlbNegativeLimit(t *testing.T) {
	m, _, _ := hugetlbFixture(t, 2)
	if err := m.Update(pod, cm.ResourceConfig{HugePageLimit: map[int64]int64{page2M: -1}}); err == nil {
		t.Error("a negative hugetlb limit was accepted")
	}
}

// hugetlbFixture is a host with 2Mi and 1Gi pages and the hugetlb
// controller, and the directory of pod's cgroup that holds its files.
func hugetlbFixture(t *testing.T, version int) (*Manager, string, string) {
	t.Helper()
	var m *Manager
	var dir, suffix string
	var err error
	if version == 2 {
		root := fakeCgroup2(t, "cpu memory pids hugetlb", pod)
		m, err = NewV2(root)
		dir, suffix = filepath.Join(root, pod), "max"
	} else {
		root := t.TempDir()
		for _, h := range []string{"cpu,cpuacct", "memory", "hugetlb"} {
			if err := os.MkdirAll(filepath.Join(root, h, pod), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		m, err = NewV1(root)
		dir, suffix = filepath.Join(root, "hugetlb", pod), "limit_in_bytes"
	}
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"hugetlb.2MB." + suffix: "untouched", "hugetlb.1GB." + suffix: "untouched"})
	return m.WithHugePageSizes([]int64{page2M, page1G}), dir, suffix
}
