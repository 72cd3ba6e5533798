package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/network"
)

// A berth restarted after kill -9 adopts the containerd its predecessor
// launched, and a clean shutdown (SIGTERM) then stops it, as it stops one
// it launched itself: berth recorded which containerd it manages.
func TestCleanShutdownStopsAdoptedContainerd(t *testing.T) {
	n := startNode(t)
	launched := n.containerdPid()
	n.kill9()
	mark := n.logSize()
	n.start()
	if !strings.Contains(n.logSince(mark), "adopted running containerd") {
		t.Fatalf("the restarted berth did not adopt the running containerd:\n%s", n.logSince(mark))
	}
	pid := n.containerdPid()
	if pid <= 1 || pid != launched || !alive(pid) {
		t.Fatalf("adopted containerd pid %d, want the launched %d, running", pid, launched)
	}
	n.stop()
	// The node's CRI client points at that containerd: a stopped one has no
	// sandboxes left to clean up, and its socket no longer answers.
	n.cri.Close()
	n.cri = nil
	waitFor(t, time.Minute, "the adopted containerd gone after SIGTERM", func() (bool, string) {
		return !alive(pid), "containerd still runs"
	})
}

// berth reset, after a clean stop that leaves a bridged pod (with a host
// port) and a host-network pod running, removes every trace of that berth:
// its processes, cgroups, bridge, the pod's netns and iptables rules,
// mounts and files. Run again it has nothing to do, and berth starts on
// the same root dir afterwards and runs its pods again.
func TestResetRemovesEverything(t *testing.T) {
	// With a cluster CIDR berth masquerades in a chain of its own.
	n := startNode(t, "--cluster-cidr", "10.213.0.0/16")
	hostPort := freePort(t)
	n.writeManifest("bridged.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: bridged}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    ports: [{containerPort: 8080, hostPort: %d}]
`, busybox, hostPort))
	n.writeManifest("hostnet.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, busybox))
	bridged := n.waitRunning("bridged", 2*time.Minute)
	n.waitRunning("hostnet", 2*time.Minute)
	sbs := n.sandboxes(string(bridged.UID))
	if len(sbs) != 1 {
		t.Fatalf("bridged pod has %d sandboxes", len(sbs))
	}
	sandboxID := sbs[0].Id
	if !strings.Contains(iptablesSave(t), sandboxID) {
		t.Fatalf("no iptables rule names the bridged pod's sandbox %s", sandboxID)
	}
	podPids := cgroupPids(n.cgroupRoot)
	netns := podNetNS(t, podPids)
	if len(podPids) < 4 || len(netns) != 1 {
		t.Fatalf("pod processes %v, pod network namespaces %v: want both pods' and one netns", podPids, netns)
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge); err != nil {
		t.Fatalf("no bridge %s: %v", n.bridge, err)
	}
	masq := network.MasqChain(n.cidr)
	if !strings.Contains(iptablesSave(t), masq) {
		t.Fatalf("no masquerade chain %s for %s", masq, n.cidr)
	}

	// A clean stop leaves the pods running (berth's containerd stops).
	n.stop()
	n.cri.Close()
	n.cri = nil
	for _, pid := range podPids {
		if !alive(pid) {
			t.Fatalf("pod process %d died with berth's clean stop", pid)
		}
	}

	out, code := n.reset(t)
	if code != 0 {
		t.Fatalf("berth reset exited %d:\n%s", code, out)
	}
	t.Logf("berth reset:\n%s", out)
	for _, pid := range podPids {
		if alive(pid) {
			t.Errorf("pod process %d still runs", pid)
		}
	}
	if left := processesFrom(n.root); len(left) > 0 {
		t.Errorf("processes still run from %s: %v", n.root, left)
	}
	if left := cgroupsOf(n.cgroupRoot); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bridge %s left: %v", n.bridge, err)
	}
	for _, p := range netns {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("netns %s left: %v", p, err)
		}
	}
	if save := iptablesSave(t); strings.Contains(save, sandboxID) || strings.Contains(save, masq) {
		t.Errorf("iptables rules of sandbox %s or the masquerade chain %s left:\n%s", sandboxID, masq, save)
	}
	if left := cachedCNIResults(sandboxID); len(left) > 0 {
		t.Errorf("cached CNI results of the sandbox left: %v", left)
	}
	if left := mountsBelow(n.root); len(left) > 0 {
		t.Errorf("mounts left under %s: %v", n.root, left)
	}
	// What stays is the test's: the manifests, the image tarball, berth's log.
	entries, _ := os.ReadDir(n.root)
	for _, e := range entries {
		if !slices.Contains([]string{"manifests", "images", "berth.log"}, e.Name()) {
			t.Errorf("%s left in the root dir", filepath.Join(n.root, e.Name()))
		}
	}

	out, code = n.reset(t)
	if code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("a second reset: exit %d, want 0 and nothing to do:\n%s", code, out)
	}

	// The node starts afresh on the same root dir and runs its pods.
	n.start()
	n.waitRunning("bridged", 2*time.Minute)
	n.waitRunning("hostnet", 2*time.Minute)
}

// With no containerd to stop the pods through (it was killed, and cannot
// be started: its binary is not in reset's PATH), berth reset kills the
// pods' processes and shims and removes what the CNI plugins would have:
// the pod's netns, its iptables rules and libcni's cached results, found
// by its sandbox id.
func TestResetWithoutContainerdKillsPods(t *testing.T) {
	n := startNode(t)
	n.writeManifest("bridged.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: bridged}
spec:
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    ports: [{containerPort: 8080, hostPort: %d}]
`, busybox, freePort(t)))
	bridged := n.waitRunning("bridged", 2*time.Minute)
	sandboxID := n.sandboxes(string(bridged.UID))[0].Id
	podPids := cgroupPids(n.cgroupRoot)
	netns := podNetNS(t, podPids)
	if len(netns) != 1 || !strings.Contains(iptablesSave(t), sandboxID) {
		t.Fatalf("pod netns %v, iptables rules of the sandbox: %v", netns, strings.Contains(iptablesSave(t), sandboxID))
	}
	if cached := cachedCNIResults(sandboxID); len(cached) != 2 {
		t.Fatalf("cached CNI results of the sandbox: %v, want its network's and its loopback's", cached)
	}
	n.kill9()
	n.cri.Close()
	n.cri = nil
	n.stopContainerd()

	out, code := n.reset(t, "PATH=/usr/sbin")
	t.Logf("berth reset:\n%s", out)
	if code != 0 {
		t.Fatalf("berth reset exited %d", code)
	}
	if !strings.Contains(out, "warning: start the managed containerd") {
		t.Errorf("reset did not go without containerd, as this test means it to")
	}
	for _, pid := range podPids {
		if alive(pid) {
			t.Errorf("pod process %d still runs", pid)
		}
	}
	if left := processesFrom(n.root); len(left) > 0 {
		t.Errorf("processes still run from %s: %v", n.root, left)
	}
	for _, p := range netns {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("netns %s left: %v", p, err)
		}
	}
	if save := iptablesSave(t); strings.Contains(save, sandboxID) {
		t.Errorf("iptables rules of sandbox %s left:\n%s", sandboxID, save)
	}
	if left := cachedCNIResults(sandboxID); len(left) > 0 {
		t.Errorf("cached CNI results of the sandbox left: %v", left)
	}
	if left := cgroupsOf(n.cgroupRoot); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if left := mountsBelow(n.root); len(left) > 0 {
		t.Errorf("mounts left under %s: %v", n.root, left)
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bridge %s left: %v", n.bridge, err)
	}
}

// reset runs berth reset --force with the node's configuration; env is
// added to its environment.
func (n *node) reset(t *testing.T, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "reset", "--force",
		"--root-dir", n.root,
		"--pod-manifest-path", n.manifests,
		"--pod-logs-dir", n.podLogs,
		"--cni-bridge", n.bridge,
		"--pod-cidr", n.cidr,
		"--cgroup-root", n.cgroupRoot,
		"--device-plugin-dir", n.devicePlugins,
		"--pod-resources-dir", n.podResources,
		"--pause-binary", filepath.Join(bins, "berth-pause"),
	)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("berth reset: %v", err)
	}
	return string(out), 0
}

// iptablesSave returns `iptables-save args...`.
func iptablesSave(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("iptables-save", args...).Output()
	if err != nil {
		t.Fatalf("iptables-save %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// cgroupHierarchies are the cgroup mount points.
func cgroupHierarchies() []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		_, after, _ := strings.Cut(line, " - ")
		if len(fields) > 4 && (strings.HasPrefix(after, "cgroup ") || strings.HasPrefix(after, "cgroup2 ")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// cgroupsOf lists the cgroup dirs at cgroupRoot, in any hierarchy.
func cgroupsOf(cgroupRoot string) []string {
	var out []string
	for _, m := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(m, cgroupRoot)); err == nil {
			out = append(out, filepath.Join(m, cgroupRoot))
		}
	}
	return out
}

// cgroupPids lists the processes in the cgroup tree at cgroupRoot.
func cgroupPids(cgroupRoot string) []int {
	seen := map[int]bool{}
	for _, dir := range cgroupsOf(cgroupRoot) {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "cgroup.procs" {
				data, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						seen[pid] = true
					}
				}
			}
			return nil
		})
	}
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// podNetNS lists the named network namespaces (in /run/netns) that pids
// are in, the host's excepted.
func podNetNS(t *testing.T, pids []int) []string {
	t.Helper()
	inodes := map[uint64]bool{}
	for _, pid := range pids {
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil {
			inodes[st.Ino] = true
		}
	}
	var out []string
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		var st syscall.Stat_t
		p := filepath.Join("/run/netns", e.Name())
		if syscall.Stat(p, &st) == nil && inodes[st.Ino] {
			out = append(out, p)
		}
	}
	return out
}

func mountsBelow(dir string) []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	return out
}

// berth reset refuses while berth runs on the root dir, changing nothing;
// after a crash (kill -9) it stops the pods through the containerd the
// crashed berth left running, stops that containerd, and leaves nothing.
func TestResetRefusesWhileRunningAndCleansAfterCrash(t *testing.T) {
	n := startNode(t)
	n.writeManifest("bridged.yaml", sleeper("bridged", "x"))
	before := n.waitRunning("bridged", 2*time.Minute)
	out, code := n.reset(t)
	if code == 0 || !strings.Contains(out, "stop it first") {
		t.Fatalf("berth reset while berth runs: exit %d, want a refusal:\n%s", code, out)
	}
	if after := n.waitRunning("bridged", time.Minute); containerID(t, after, "main") != containerID(t, before, "main") {
		t.Fatalf("the refused reset disturbed the pod")
	}

	n.kill9()
	containerdPid := n.containerdPid()
	podPids := cgroupPids(n.cgroupRoot)
	if containerdPid <= 1 || !alive(containerdPid) || len(podPids) == 0 {
		t.Fatalf("after kill -9: containerd %d, pod processes %v", containerdPid, podPids)
	}
	n.cri.Close()
	n.cri = nil
	out, code = n.reset(t)
	if code != 0 {
		t.Fatalf("berth reset exited %d:\n%s", code, out)
	}
	if !strings.Contains(out, "removed pod default/bridged-"+nodeName) {
		t.Errorf("the pod was not removed through the CRI:\n%s", out)
	}
	if alive(containerdPid) {
		t.Errorf("the containerd left by the crashed berth (pid %d) still runs", containerdPid)
	}
	for _, pid := range podPids {
		if alive(pid) {
			t.Errorf("pod process %d still runs", pid)
		}
	}
	if left := processesFrom(n.root); len(left) > 0 {
		t.Errorf("processes still run from %s: %v", n.root, left)
	}
	if left := cgroupsOf(n.cgroupRoot); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bridge %s left: %v", n.bridge, err)
	}
	if left := mountsBelow(n.root); len(left) > 0 {
		t.Errorf("mounts left under %s: %v", n.root, left)
	}
	if _, err := os.Stat(filepath.Join(n.root, "containerd")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("containerd's state left: %v", err)
	}
}
