package cgroupfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/cm"
)

// fakeCgroup2 lays out a temporary directory the way cgroup2fs looks after
// each cgroup in cgroups (and its ancestors) was made. The kernel creates a
// cgroup's interface files at mkdir; a plain directory cannot, so the test
// plays the kernel here rather than the Manager creating files: on the real
// filesystem a missing file means a missing cgroup or controller, and the
// Manager must report that, not paper over it.
func fakeCgroup2(t *testing.T, controllers string, cgroups ...string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": "", "cgroup.procs": ""}
	writeFiles(t, root, files)
	cgroupFiles := map[string]string{
		"cgroup.controllers": controllers, "cgroup.subtree_control": "", "cgroup.procs": "",
		"cpu.weight": "100", "cpu.max": "max 100000", "memory.max": "max", "memory.current": "0", "pids.max": "max",
	}
	for _, cg := range cgroups {
		for _, level := range levels(cg) {
			if err := os.MkdirAll(filepath.Join(root, level), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, filepath.Join(root, level), cgroupFiles)
		}
	}
	return root
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const pod = "/kubepods/burstable/podx"

func TestV2CreateWritesKernelFormats(t *testing.T) {
	root := fakeCgroup2(t, "cpuset cpu io memory hugetlb pids rdma misc", pod)
	m, err := NewV2(root)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cm.ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(1 << 30), PidsLimit: i64(100)}
	if err := m.Create(pod, cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/cgroup.subtree_control":                         "+cpu +memory +pids +hugetlb",
		"/kubepods/cgroup.subtree_control":                "+cpu +memory +pids +hugetlb",
		"/kubepods/burstable/cgroup.subtree_control":      "+cpu +memory +pids +hugetlb",
		"/kubepods/burstable/podx/cgroup.subtree_control": "", // runc's to set
		pod + "/cpu.weight":                               "39",
		pod + "/cpu.max":                                  "50000 100000",
		pod + "/memory.max":                               "1073741824",
		pod + "/pids.max":                                 "100",
		"/kubepods/cpu.weight":                            "100", // parents keep the kernel's defaults
	}
	for f, w := range want {
		if got := content(t, filepath.Join(root, f)); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}
}

func TestV2Update(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  cm.ResourceConfig
		want map[string]string // file -> content; the rest keep the kernel's defaults
	}{
		{"nothing", cm.ResourceConfig{}, nil},
		{"min shares", cm.ResourceConfig{CPUShares: u64(2)}, map[string]string{"cpu.weight": "1"}},
		{"max shares", cm.ResourceConfig{CPUShares: u64(262144)}, map[string]string{"cpu.weight": "10000"}},
		{"shares below the kernel's range", cm.ResourceConfig{CPUShares: u64(0)}, map[string]string{"cpu.weight": "1"}},
		{"quota and period", cm.ResourceConfig{CPUQuota: i64(50000), CPUPeriod: u64(100000)}, map[string]string{"cpu.max": "50000 100000"}},
		{"unlimited quota", cm.ResourceConfig{CPUQuota: i64(-1), CPUPeriod: u64(100000)}, map[string]string{"cpu.max": "max 100000"}},
		{"quota keeps the period", cm.ResourceConfig{CPUQuota: i64(20000)}, map[string]string{"cpu.max": "20000 100000"}},
		{"period keeps the quota", cm.ResourceConfig{CPUPeriod: u64(50000)}, map[string]string{"cpu.max": "max 50000"}},
		{"memory", cm.ResourceConfig{Memory: i64(64 << 20)}, map[string]string{"memory.max": "67108864"}},
		{"unlimited memory", cm.ResourceConfig{Memory: i64(-1)}, map[string]string{"memory.max": "max"}},
		{"pids", cm.ResourceConfig{PidsLimit: i64(1024)}, map[string]string{"pids.max": "1024"}},
		{"unlimited pids", cm.ResourceConfig{PidsLimit: i64(-1)}, map[string]string{"pids.max": "max"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeCgroup2(t, "cpu memory pids", pod)
			m, err := NewV2(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Update(pod, tc.cfg); err != nil {
				t.Fatal(err)
			}
			defaults := map[string]string{"cpu.weight": "100", "cpu.max": "max 100000", "memory.max": "max", "pids.max": "max"}
			for f, d := range defaults {
				w, ok := tc.want[f]
				if !ok {
					w = d
				}
				if got := content(t, filepath.Join(root, pod, f)); got != w {
					t.Errorf("%s = %q, want %q", f, got, w)
				}
			}
		})
	}
}

func TestV2Read(t *testing.T) {
	root := fakeCgroup2(t, "cpu memory pids", pod)
	m, err := NewV2(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	// The default cpu.weight, 100, reads as 2 + ceil(99*262142/9999) shares.
	if w := "shares=2598 quota=-1 period=100000 memory=-1 pids=-1"; show(got) != w {
		t.Errorf("Read of the kernel's defaults = %s, want %s", show(got), w)
	}
	set := cm.ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(25000), CPUPeriod: u64(50000), Memory: i64(1 << 20), PidsLimit: i64(7)}
	if err := m.Update(pod, set); err != nil {
		t.Fatal(err)
	}
	got, err = m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	// The weight is lossy: Read gives the smallest shares with the same weight.
	if w := "shares=999 quota=25000 period=50000 memory=1048576 pids=7"; show(got) != w {
		t.Errorf("Read = %s, want %s", show(got), w)
	}
	if err := m.Update(pod, got); err != nil {
		t.Fatal(err)
	}
	if c := content(t, filepath.Join(root, pod, "cpu.weight")); c != "39" {
		t.Errorf("writing back what Read returned changed cpu.weight to %s", c)
	}
}

// TestWeightToShares: for every weight, the shares Read reports map back to
// that weight, and are the smallest that do.
func TestWeightToShares(t *testing.T) {
	for w := uint64(1); w <= 10000; w++ {
		s := weightToShares(w)
		if got := cm.SharesToWeight(s); got != w {
			t.Fatalf("SharesToWeight(weightToShares(%d) = %d) = %d", w, s, got)
		}
		if w > 1 && cm.SharesToWeight(s-1) == w {
			t.Fatalf("weightToShares(%d) = %d is not the smallest", w, s)
		}
	}
}

// TestV2NeverCreatesInterfaceFiles: a file the kernel did not make (here:
// the fake tree has no such cgroup) is an error naming it, never a new file.
func TestV2NeverCreatesInterfaceFiles(t *testing.T) {
	root := fakeCgroup2(t, "cpu memory pids")
	m, err := NewV2(root)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Create("/podx", cm.ResourceConfig{Memory: i64(1 << 20)})
	file := filepath.Join(root, "podx", "memory.max")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "write "+file+" = 1048576") {
		t.Errorf("Create = %v; want ENOENT naming %s", err, file)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s was created: %v", file, err)
	}
}

// TestV2MissingController: a limit the host cannot enforce is refused up
// front, naming the field and controller, before anything is created.
func TestV2MissingController(t *testing.T) {
	root := fakeCgroup2(t, "memory pids", "/kubepods/podx")
	m, err := NewV2(root)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Create("/kubepods/podx", cm.ResourceConfig{CPUShares: u64(2), Memory: i64(1 << 20)})
	if err == nil || !strings.Contains(err.Error(), "CPUShares needs the cpu controller") {
		t.Errorf("Create = %v; want CPUShares needs the cpu controller", err)
	}
	if c := content(t, filepath.Join(root, "cgroup.subtree_control")); c != "" {
		t.Errorf("a refused Create wrote subtree_control %q", c)
	}
	if err := m.Create("/kubepods/podx", cm.ResourceConfig{Memory: i64(1 << 20)}); err != nil {
		t.Fatal(err)
	}
	if c := content(t, filepath.Join(root, "kubepods", "cgroup.subtree_control")); c != "+memory +pids" {
		t.Errorf("subtree_control = %q, want only the available controllers, +memory +pids", c)
	}
}

// TestV2RealTree runs the structural half (mkdir, processes, rmdir) on this
// host's real cgroup2 mount, which has no controllers.
func TestV2RealTree(t *testing.T) {
	const unified = "/sys/fs/cgroup/unified"
	var st unix.Statfs_t
	if err := unix.Statfs(unified, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Fatalf("this test needs the hybrid host's cgroup2 mount at %s: %v", unified, err)
	}
	m, err := NewV2(unified)
	if err != nil {
		t.Fatal(err)
	}
	base := uniquePath(t)
	t.Cleanup(func() { removeUnder(t, m.hierarchies, base) })
	p := base + "/kubepods/podx"

	if err := m.Create(p, cm.ResourceConfig{PidsLimit: i64(10)}); err == nil || !strings.Contains(err.Error(), "needs the pids controller") {
		t.Errorf("Create with a limit on a controller-less cgroup2 = %v; want a missing-controller error", err)
	}
	if err := m.Create(p, cm.ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	if !m.Exists(p) {
		t.Fatalf("Exists(%s) = false after Create", p)
	}
	if got, err := m.Children(base + "/kubepods"); err != nil || !slices.Equal(got, []string{"podx"}) {
		t.Errorf("Children = %v, %v; want [podx]", got, err)
	}
	sleep := startSleep(t)
	pid := sleep.Process.Pid
	join(t, filepath.Join(unified, p), pid)
	if got, err := m.Pids(base); err != nil || !slices.Equal(got, []int{pid}) {
		t.Errorf("Pids(%s) = %v, %v; want [%d]", base, got, err, pid)
	}
	err = m.Destroy(base)
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("Destroy with a process inside = %v; want EBUSY naming %s and %d", err, base, pid)
	}
	stop(sleep)
	if err := m.Destroy(base); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(unified, base)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left after Destroy: %v", base, err)
	}
}
