package cgroupfs

import (
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/cm"
)

// killedBySIGKILL reaps cmd and reports whether SIGKILL ended it.
func killedBySIGKILL(t *testing.T, cmd *exec.Cmd) bool {
	t.Helper()
	_ = cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// On this host's v1 hierarchies Kill goes through the freezer: every
// process of the pod cgroup and of its container cgroups dies, the freezer
// is thawed again, and the cgroup can go.
func TestV1KillStragglers(t *testing.T) {
	m, base := realV1(t)
	pod := base + "/kubepods/podx"
	ctr := pod + "/ctr"
	if err := m.Create(ctr, cm.ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	inPod, inCtr := startSleep(t), startSleep(t)
	for _, h := range m.hierarchies {
		join(t, filepath.Join(h, pod), inPod.Process.Pid)
		join(t, filepath.Join(h, ctr), inCtr.Process.Pid)
	}
	want := []int{inPod.Process.Pid, inCtr.Process.Pid}
	slices.Sort(want)
	got, err := m.Kill(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Kill = %v, want %v", got, want)
	}
	for _, cmd := range []*exec.Cmd{inPod, inCtr} {
		if !killedBySIGKILL(t, cmd) {
			t.Errorf("pid %d: ended by %v, want SIGKILL", cmd.Process.Pid, cmd.ProcessState)
		}
	}
	if s := content(t, filepath.Join(m.controllers["freezer"], pod, "freezer.state")); s != "THAWED" {
		t.Errorf("freezer.state = %s after Kill, want THAWED", s)
	}
	if err := m.Destroy(pod); err != nil {
		t.Errorf("Destroy after Kill: %v", err)
	}
	if got, err := m.Kill(pod); err != nil || len(got) != 0 {
		t.Errorf("Kill of a cgroup that is gone = %v, %v; want nothing", got, err)
	}
}

// On cgroup2 with cgroup.kill (Linux 5.14+, this host's unified mount) the
// kernel kills the subtree.
func TestV2KillWritesCgroupKill(t *testing.T) {
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
	ctr := base + "/kubepods/podx/ctr"
	if err := m.Create(ctr, cm.ResourceConfig{}); err != nil {
		t.Fatal(err)
	}
	sleep := startSleep(t)
	join(t, filepath.Join(unified, ctr), sleep.Process.Pid)
	got, err := m.Kill(base + "/kubepods/podx")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{sleep.Process.Pid}) {
		t.Errorf("Kill = %v, want [%d]", got, sleep.Process.Pid)
	}
	if !killedBySIGKILL(t, sleep) {
		t.Errorf("ended by %v, want SIGKILL", sleep.ProcessState)
	}
	if err := m.Destroy(base); err != nil {
		t.Errorf("Destroy after Kill: %v", err)
	}
}

// A cgroup2 kernel older than 5.14 has no cgroup.kill: the cgroup is frozen
// around a kill of each pid, and thawed again.
func TestV2KillWithoutCgroupKillFreezes(t *testing.T) {
	root := fakeCgroup2(t, "cpu memory pids", pod)
	writeFiles(t, filepath.Join(root, pod), map[string]string{"cgroup.freeze": "0"})
	m, err := NewV2(root)
	if err != nil {
		t.Fatal(err)
	}
	sleep := startSleep(t)
	join(t, filepath.Join(root, pod), sleep.Process.Pid)
	got, err := m.Kill(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{sleep.Process.Pid}) {
		t.Errorf("Kill = %v, want [%d]", got, sleep.Process.Pid)
	}
	if !killedBySIGKILL(t, sleep) {
		t.Errorf("ended by %v, want SIGKILL", sleep.ProcessState)
	}
	if s := content(t, filepath.Join(root, pod, "cgroup.freeze")); s != "0" {
		t.Errorf("cgroup.freeze = %q after Kill, want thawed (0)", s)
	}
}

func TestKillRefusesTheRoot(t *testing.T) {
	m, err := NewV2(fakeCgroup2(t, "cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Kill("/"); err == nil {
		t.Error("Kill(/) succeeded; the root cgroup is the host's")
	}
}
