package cgroupfs

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/cm"
)

// realV1 is the host's cgroup v1 manager and a unique base path under it,
// removed from every hierarchy when the test ends (after its processes are
// killed: cleanups run last-registered first).
func realV1(t *testing.T) (*Manager, string) {
	t.Helper()
	m, err := New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 1 {
		t.Fatalf("these tests need the cgroup v1 hierarchies this host has; New found v%d", m.Version())
	}
	base := uniquePath(t)
	t.Cleanup(func() { removeUnder(t, m.hierarchies, base) })
	return m, base
}

func TestNewDetectsV1OnThisHost(t *testing.T) {
	m, err := New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 1 {
		t.Fatalf("Version() = %d, want 1", m.Version())
	}
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio", "systemd"} {
		if m.controllers[c] == "" {
			t.Errorf("controller %s not found; hierarchies %v", c, m.hierarchies)
		}
	}
	if slices.Contains(m.hierarchies, "/sys/fs/cgroup/unified") {
		t.Errorf("the cgroup2 mount of a hybrid host counted as a v1 hierarchy: %v", m.hierarchies)
	}
}

func TestV1Lifecycle(t *testing.T) {
	m, base := realV1(t)
	pod := base + "/kubepods/podx"
	want := cm.ResourceConfig{CPUShares: u64(512), CPUQuota: i64(20000), CPUPeriod: u64(100000), Memory: i64(256 << 20), PidsLimit: i64(50)}

	for range 2 { // idempotent
		if err := m.Create(pod, want); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range m.hierarchies {
		if fi, err := os.Stat(filepath.Join(h, pod)); err != nil || !fi.IsDir() {
			t.Errorf("%s: not created: %v", filepath.Join(h, pod), err)
		}
	}
	if !m.Exists(pod) {
		t.Errorf("Exists(%s) = false after Create", pod)
	}
	got, err := m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	if show(got) != show(want) {
		t.Errorf("Read(%s) = %s, want %s", pod, show(got), show(want))
	}
	parent, err := m.Read(base + "/kubepods")
	if err != nil {
		t.Fatal(err)
	}
	if w := "shares=1024 quota=-1 period=100000 memory=-1 pids=-1"; show(parent) != w {
		t.Errorf("parent created with %s, want the kernel defaults %s", show(parent), w)
	}
	cpuset := m.controllers["cpuset"]
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		if got, want := content(t, filepath.Join(cpuset, pod, f)), content(t, filepath.Join(cpuset, f)); got != want || got == "" {
			t.Errorf("%s = %q, want the root's %q", filepath.Join(cpuset, pod, f), got, want)
		}
	}

	// Unlimited, leaving the nil fields alone.
	if err := m.Update(pod, cm.ResourceConfig{CPUQuota: i64(-1), Memory: i64(-1), PidsLimit: i64(-1)}); err != nil {
		t.Fatal(err)
	}
	got, err = m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	if w := "shares=512 quota=-1 period=100000 memory=-1 pids=-1"; show(got) != w {
		t.Errorf("after Update: Read = %s, want %s", show(got), w)
	}
	if c := content(t, filepath.Join(m.controllers["pids"], pod, "pids.max")); c != "max" {
		t.Errorf("pids.max = %q, want max", c)
	}

	for p, want := range map[string][]string{base: {"kubepods"}, base + "/kubepods": {"podx"}, pod: nil} {
		got, err := m.Children(p)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Children(%s) = %v, %v; want %v", p, got, err, want)
		}
	}

	sleep := startSleep(t)
	pid := sleep.Process.Pid
	join(t, filepath.Join(m.controllers["cpu"], pod), pid)
	join(t, filepath.Join(m.controllers["memory"], pod), pid)
	// Only possible because Create copied cpuset.cpus and cpuset.mems.
	join(t, filepath.Join(m.controllers["cpuset"], pod), pid)
	for _, p := range []string{base, pod} {
		if got, err := m.Pids(p); err != nil || !slices.Equal(got, []int{pid}) {
			t.Errorf("Pids(%s) = %v, %v; want [%d]", p, got, err, pid)
		}
	}
	err = m.Destroy(pod)
	if err == nil || !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), pod) || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("Destroy with a process inside = %v; want EBUSY naming %s and pid %d", err, pod, pid)
	}
	if !m.Exists(pod) {
		t.Errorf("a refused Destroy removed part of %s", pod)
	}

	stop(sleep)
	if err := m.Destroy(base); err != nil {
		t.Fatal(err)
	}
	for _, h := range m.hierarchies {
		if _, err := os.Stat(filepath.Join(h, base)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after Destroy: %v", filepath.Join(h, base), err)
		}
	}
	if m.Exists(pod) {
		t.Errorf("Exists(%s) after Destroy", pod)
	}
	if err := m.Destroy(base); err != nil {
		t.Errorf("Destroy of a missing cgroup = %v, want nil", err)
	}
}

// TestV1MemoryLimitBelowUsage: v1 refuses (EBUSY) a limit under what the
// cgroup uses when it cannot reclaim the difference (no swap here), and the
// caller must be able to tell that apart from other failures.
func TestV1MemoryLimitBelowUsage(t *testing.T) {
	m, base := realV1(t)
	pod := base + "/podx"
	if err := m.Create(pod, cm.ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	const mib = 64
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(self)
	child.Env = append(os.Environ(), fmt.Sprintf("%s=alloc:%d", helperEnv, mib))
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(child) })
	join(t, filepath.Join(m.controllers["memory"], pod), child.Process.Pid)
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper said %q, %v; want ready", line, err)
	}

	usage, err := m.MemoryUsage(pod)
	if err != nil {
		t.Fatal(err)
	}
	if usage < mib<<20 {
		t.Fatalf("MemoryUsage = %d, want at least %d", usage, mib<<20)
	}
	err = m.Update(pod, cm.ResourceConfig{Memory: i64(16 << 20)})
	file := filepath.Join(m.controllers["memory"], pod, "memory.limit_in_bytes")
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "write "+file+" = 16777216: device or resource busy") {
		t.Errorf("limit below usage: %v; want EBUSY naming %s and the value", err, file)
	}
	if err := m.Update(pod, cm.ResourceConfig{Memory: i64(1 << 30)}); err != nil {
		t.Errorf("limit above usage: %v", err)
	}
}

// TestV1CFSOrder: under a parent capped at half a CPU, 50000/100000 ->
// 25000/50000 only works quota first, and 25000/50000 -> 50000/100000 only
// period first; Update must find the order either way.
func TestV1CFSOrder(t *testing.T) {
	m, base := realV1(t)
	half := cm.ResourceConfig{CPUQuota: i64(50000), CPUPeriod: u64(100000)}
	if err := m.Create(base, half); err != nil {
		t.Fatal(err)
	}
	pod := base + "/podx"
	if err := m.Create(pod, half); err != nil {
		t.Fatal(err)
	}
	for _, c := range []cm.ResourceConfig{
		{CPUQuota: i64(25000), CPUPeriod: u64(50000)},
		{CPUQuota: i64(50000), CPUPeriod: u64(100000)},
	} {
		if err := m.Update(pod, c); err != nil {
			t.Errorf("Update(%s): %v", show(c), err)
		}
		if got, err := m.Read(pod); err != nil || *got.CPUQuota != *c.CPUQuota || *got.CPUPeriod != *c.CPUPeriod {
			t.Errorf("after Update(%s): Read = %s, %v", show(c), show(got), err)
		}
	}
	// A quota above the parent's is refused by the kernel, and the error
	// says which file and value.
	err := m.Update(pod, cm.ResourceConfig{CPUQuota: i64(80000)})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "cpu.cfs_quota_us = 80000") {
		t.Errorf("quota above the parent's: %v; want EINVAL naming cpu.cfs_quota_us = 80000", err)
	}
}

func TestV1UpdateMissingCgroup(t *testing.T) {
	m, base := realV1(t)
	err := m.Update(base, cm.ResourceConfig{CPUShares: u64(2)})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(m.controllers["cpu"], base, "cpu.shares")) {
		t.Errorf("Update of a missing cgroup = %v; want ENOENT naming its cpu.shares", err)
	}
	if m.Exists(base) {
		t.Errorf("Update created %s", base)
	}
}

// On a hybrid host runc also puts a container's cgroup in the cgroup2 mount
// (unified), under the pod's path, where berth creates nothing: a process
// there still holds the pod's cgroup, and Destroy removes that copy too,
// or every pod would leave a directory there.
func TestV1DestroyRemovesTheUnifiedCopy(t *testing.T) {
	m, base := realV1(t)
	if m.unified != "/sys/fs/cgroup/unified" {
		t.Fatalf("unified = %q: this host mounts cgroup2 at /sys/fs/cgroup/unified beside its v1 hierarchies", m.unified)
	}
	t.Cleanup(func() { removeUnder(t, []string{m.unified}, base) })
	pod := base + "/kubepods/podx"
	if err := m.Create(pod, cm.ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	ctr := filepath.Join(m.unified, pod, "ctr") // what runc makes
	if err := os.MkdirAll(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	sleep := startSleep(t)
	join(t, ctr, sleep.Process.Pid)
	pids, err := m.Pids(pod)
	if err != nil || !slices.Contains(pids, sleep.Process.Pid) {
		t.Errorf("Pids(%s) = %v, %v; want the process in the unified copy", pod, pids, err)
	}
	if err := m.Destroy(pod); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Destroy with a process in the unified copy = %v, want EBUSY", err)
	}
	stop(sleep)
	// The kernel lets go of an emptied cgroup a moment after the reap.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = m.Destroy(base)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.unified, base)); !os.IsNotExist(err) {
		t.Errorf("%s left after Destroy: %v", filepath.Join(m.unified, base), err)
	}
}
