package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The containerd a restarted berth adopted is supervised like the one it
// started: killed, it is started again, the running pod is untouched and a
// new pod runs.
func TestAdoptedContainerdIsRestarted(t *testing.T) {
	n := startNode(t)
	n.writeManifest("steady.yaml", sleeper("steady", "x"))
	before := n.waitRunning("steady", time.Minute)
	id := containerID(t, before, "main")

	// A crash of berth leaves containerd running; the next berth adopts it.
	n.kill9()
	mark := n.logSize()
	n.start()
	if !strings.Contains(n.logSince(mark), "adopted running containerd") {
		t.Fatalf("the restarted berth did not adopt the running containerd:\n%s", n.logSince(mark))
	}
	oldPid := n.containerdPid()
	if oldPid <= 1 {
		t.Fatalf("no containerd pid file after adoption")
	}
	killed := time.Now()
	if err := syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "a new containerd", func() (bool, string) {
		pid := n.containerdPid()
		return pid > 1 && pid != oldPid && alive(pid), fmt.Sprintf("pid file says %d", pid)
	})
	waitFor(t, 2*time.Minute, "the new containerd ready", func() (bool, string) {
		return strings.Contains(n.logSince(mark), "containerd is back"), "not yet"
	})
	t.Logf("containerd killed; berth saw it back %v later", time.Since(killed))
	n.writeManifest("fresh.yaml", sleeper("fresh", "x"))
	n.waitRunning("fresh", 2*time.Minute)
	after := n.waitRunning("steady", time.Minute)
	if got := containerID(t, after, "main"); got != id || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the running pod was disturbed: container %s -> %s, restarts %d",
			id, got, after.Status.ContainerStatuses[0].RestartCount)
	}
	if log := n.logSince(mark); !strings.Contains(log, "containerd exited") {
		t.Errorf("berth did not log the containerd's exit:\n%s", log)
	}
	reasons := map[string]bool{}
	for _, ev := range n.nodeEvents() {
		reasons[ev.Reason] = true
	}
	if !reasons["ContainerdExited"] || !reasons["ContainerdRestarted"] {
		t.Errorf("node events %v, want ContainerdExited and ContainerdRestarted", reasons)
	}
}

// A berth that starts containerd on a node with many pods waits until
// containerd's CRI is ready (it recovers every pod first) before it imports
// the pause image: every start succeeds, again and again. containerd runs
// on a tenth of a CPU while berth starts, as on a machine loaded by other
// work, which makes its recovery take seconds.
func TestStartupWaitsForCRIReady(t *testing.T) {
	const pods = 30
	n := startNode(t)
	for i := range pods {
		n.writeManifest(fmt.Sprintf("p%02d.yaml", i), sleeper(fmt.Sprintf("p%02d", i), "x"))
	}
	for i := range pods {
		n.waitRunning(fmt.Sprintf("p%02d", i), 5*time.Minute)
	}
	slow := newSlowContainerd(t)
	for round := range 3 {
		// berth and its containerd both die: the next berth must start a
		// containerd that has every pod to recover.
		n.kill9()
		n.stopContainerd()
		mark := n.logSize()
		n.startQuiet(slow.env()...)
		ok := waitHealthy(n, 4*time.Minute)
		slow.release(n.containerdPid())
		if !ok {
			t.Fatalf("round %d: berth did not start with %d pods present:\n%s", round, pods, tail(n.logSince(mark), 6000))
		}
		line := logLine(n.logSince(mark), `"containerd started"`)
		if line == "" {
			t.Fatalf("round %d: berth did not start a containerd of its own:\n%s", round, tail(n.logSince(mark), 6000))
		}
		t.Logf("round %d: %s", round, line)
	}
	for i := range pods {
		n.waitRunning(fmt.Sprintf("p%02d", i), 2*time.Minute)
	}
}

// slowContainerd is a containerd wrapper, first in berth's PATH, that puts
// containerd in a cgroup with a CPU quota of a tenth of a CPU.
type slowContainerd struct {
	t      *testing.T
	bin    string // the wrapper's dir
	cgroup string // the cgroup's dir
	parent string // where release moves containerd to
}

func newSlowContainerd(t *testing.T) *slowContainerd {
	real, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("berth-e2e-slow-%08x", rand.Uint32())
	s := &slowContainerd{t: t, bin: t.TempDir()}
	if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil { // cgroup v1
		s.parent = "/sys/fs/cgroup/cpu"
		s.cgroup = filepath.Join(s.parent, name)
		mustMkdir(t, s.cgroup)
		mustWrite(t, filepath.Join(s.cgroup, "cpu.cfs_period_us"), "100000")
		mustWrite(t, filepath.Join(s.cgroup, "cpu.cfs_quota_us"), "10000")
	} else {
		s.parent = "/sys/fs/cgroup"
		s.cgroup = filepath.Join(s.parent, name)
		mustMkdir(t, s.cgroup)
		mustWrite(t, filepath.Join(s.cgroup, "cpu.max"), "10000 100000")
	}
	t.Cleanup(func() {
		procs, _ := os.ReadFile(filepath.Join(s.cgroup, "cgroup.procs"))
		for _, pid := range strings.Fields(string(procs)) {
			_ = os.WriteFile(filepath.Join(s.parent, "cgroup.procs"), []byte(pid), 0o644)
		}
		if err := os.Remove(s.cgroup); err != nil {
			t.Errorf("cleanup: remove %s: %v", s.cgroup, err)
		}
	})
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s/cgroup.procs || exit 1\nexec %s \"$@\"\n", s.cgroup, real)
	if err := os.WriteFile(filepath.Join(s.bin, "containerd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *slowContainerd) env() []string {
	return []string{"PATH=" + s.bin + ":" + os.Getenv("PATH")}
}

// release lets containerd run at full speed again.
func (s *slowContainerd) release(pid int) {
	if pid > 1 {
		_ = os.WriteFile(filepath.Join(s.parent, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// SIGTERM while berth is starting stops the containerd berth launched,
// wherever start-up is when the signal comes; a berth that adopted a
// running containerd stops that one too, as it does on any clean shutdown
// (it recorded the containerd it manages).
func TestSignalDuringStartupStopsLaunchedContainerd(t *testing.T) {
	n := startNode(t)
	for i := range 5 {
		n.writeManifest(fmt.Sprintf("p%d.yaml", i), sleeper(fmt.Sprintf("p%d", i), "x"))
	}
	for i := range 5 {
		n.waitRunning(fmt.Sprintf("p%d", i), 2*time.Minute)
	}
	pidFile := filepath.Join(n.root, "containerd", "containerd.pid")
	socket := filepath.Join(n.root, "containerd", "containerd.sock")
	// The moments of start-up, each marked by what berth has done by then.
	moments := []struct {
		name    string
		reached func(log string) bool
	}{
		{"containerd launched (pid file written)", func(string) bool {
			_, err := os.Stat(pidFile)
			return err == nil
		}},
		{"containerd's socket is there", func(string) bool {
			_, err := os.Stat(socket)
			return err == nil
		}},
		{"containerd is ready", func(log string) bool { return strings.Contains(log, `"containerd started"`) }},
		{"runtime connected", func(log string) bool { return strings.Contains(log, `"container runtime ready"`) }},
	}
	slow := newSlowContainerd(t)
	for _, m := range moments {
		n.kill9()
		n.stopContainerd()
		// The pid file and socket of the containerd just stopped would
		// mark the first moments before berth reached them.
		for _, f := range []string{pidFile, socket} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		mark := n.logSize()
		cmd := n.startQuiet(slow.env()...)
		waitFor(t, 2*time.Minute, m.name, func() (bool, string) {
			select {
			case <-n.exited:
				t.Fatalf("berth exited before %s:\n%s", m.name, tail(n.logSince(mark), 6000))
			default:
			}
			return m.reached(n.logSince(mark)), "not yet"
		})
		stopping := time.Now()
		n.stop()
		t.Logf("SIGTERM when %s: berth exited in %v", m.name, time.Since(stopping))
		// A stop asked for is no failure: no error, status 0.
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("SIGTERM when %s: berth exited with status %d:\n%s", m.name, code, tail(n.logSince(mark), 3000))
		}
		if pids := containerdsOf(n.root); len(pids) > 0 {
			t.Errorf("SIGTERM when %s: containerd %v of %s still runs after berth exited:\n%s",
				m.name, pids, n.root, tail(n.logSince(mark), 6000))
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}

	// An adopted containerd is berth's to stop, during start-up too.
	n.start()
	n.kill9()
	adopted := n.containerdPid()
	mark := n.logSize()
	n.startQuiet()
	waitFor(t, 2*time.Minute, "adoption", func() (bool, string) {
		return strings.Contains(n.logSince(mark), "adopted running containerd"), "not yet"
	})
	n.stop()
	if alive(adopted) || len(containerdsOf(n.root)) > 0 {
		t.Errorf("SIGTERM during start-up left the adopted containerd %d running: %v", adopted, containerdsOf(n.root))
	}
	// Leave a running node for the cleanup, which removes the pods through it.
	n.start()
	for i := range 5 {
		n.waitRunning(fmt.Sprintf("p%d", i), time.Minute)
	}
}

// waitHealthy waits until berth's API answers; false if berth exits first
// or timeout passes.
func waitHealthy(n *node, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			n.pid = 0
			return false
		default:
		}
		if _, err := n.get("/healthz"); err == nil {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (n *node) containerdPid() int {
	data, err := os.ReadFile(filepath.Join(n.root, "containerd", "containerd.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

func (n *node) logSize() int64 {
	st, err := os.Stat(filepath.Join(n.root, "berth.log"))
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince is berth's log from offset on.
func (n *node) logSince(offset int64) string {
	data, _ := os.ReadFile(filepath.Join(n.root, "berth.log"))
	if int64(len(data)) < offset {
		return string(data)
	}
	return string(data[offset:])
}

// logLine is the first line of log that contains s, or "".
func logLine(log, s string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

func tail(s string, max int) string {
	if len(s) > max {
		return s[len(s)-max:]
	}
	return s
}

// containerdsOf lists the live containerd processes running root's config
// (shims name the socket, never the config).
func containerdsOf(root string) []int {
	config := filepath.Join(root, "containerd", "config.toml")
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !slices.Contains(strings.Split(string(data), "\x00"), config) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
