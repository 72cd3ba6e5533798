package chaos

import (
	"context"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/hostclean"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// leftovers lists what the node left on the host. It is called once berth
// and its containerd are stopped and every pod was deleted.
func (n *node) leftovers() Leftovers {
	var l Leftovers
	l.Processes = processesUnder(n.root)
	for _, cg := range podCgroups(n.cgroupRoot) {
		if strings.HasPrefix(cg, "/sys/fs/cgroup/unified/") {
			l.UnifiedCgroups = append(l.UnifiedCgroups, cg)
		} else {
			l.PodCgroups = append(l.PodCgroups, cg)
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		l.Mounts = MountsUnder(string(data), n.root)
	}
	if out, err := commandOutput("ip", "-o", "link", "show"); err == nil {
		l.Veths = EnslavedTo(out, n.bridge)
	}
	for _, path := range n.netns {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err == nil {
			l.Netns = append(l.Netns, path)
		}
	}
	if out, err := commandOutput("iptables-save", "-t", "nat"); err == nil {
		l.NAT = NATRulesFor(out, netip.MustParsePrefix(n.cidr))
	}
	rc := n.resultCache()
	ids, _ := rc.Owned()
	for _, id := range ids {
		l.CNICache = append(l.CNICache, rc.Files(id)...)
	}
	return l
}

// resultCache is libcni's cache of the node's network attachments.
func (n *node) resultCache() cnigc.ResultCache {
	return cnigc.ResultCache{Dir: cnigc.DefaultResultsDir, Network: "berth", IPAMDir: filepath.Join(n.root, "cni", "ipam")}
}

func commandOutput(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	return string(out), err
}

// processesUnder lists the processes whose command line names a path under
// root: containerd, its shims, and anything they left.
func processesUnder(root string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), root+"/") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid <= 1 || pid == os.Getpid() || !hostclean.Alive(pid) {
			continue
		}
		out = append(out, strconv.Itoa(pid)+": "+strings.ReplaceAll(string(data), "\x00", " "))
	}
	return out
}

// podCgroups lists the pod cgroups (pod<UID>) left under cgroupRoot in any
// hierarchy.
func podCgroups(cgroupRoot string) []string {
	var out []string
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, m := range append(mounts, "/sys/fs/cgroup") {
		top := filepath.Join(m, cgroupRoot)
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.HasPrefix(d.Name(), "pod") {
				out = append(out, path)
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out
}

// stopContainerd stops this node's containerd, whoever started it.
func (n *node) stopContainerd() {
	if pid := n.containerdPid(); pid > 1 {
		hostclean.Stop(pid, 10*time.Second)
	}
}

// cleanup removes everything the node made, whatever state the run left it
// in: berth, sandboxes, containerd, leftover processes, cgroups, mounts,
// the bridge, network namespaces and the root dir.
func (n *node) cleanup() {
	t := n.t
	if n.plugin != nil {
		n.plugin.Stop()
	}
	// SIGKILL leaves containerd running, so the sandboxes can go through it.
	n.kill9()
	if n.cri == nil {
		_ = n.dialCRI()
	}
	if n.cri != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		sbs, _ := n.cri.ListPodSandboxes(ctx, nil)
		for _, sb := range sbs {
			if err := n.cri.StopPodSandbox(ctx, sb.Id); err != nil {
				t.Logf("cleanup: stop sandbox %s: %v", sb.Id, err)
			}
			if err := n.cri.RemovePodSandbox(ctx, sb.Id); err != nil {
				t.Logf("cleanup: remove sandbox %s: %v", sb.Id, err)
			}
		}
		cancel()
		n.cri.Close()
	}
	n.stopContainerd()
	for _, p := range processesUnder(n.root) {
		pid, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
		if err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if hostclean.KillCgroupProcs(n.cgroupRoot) {
		time.Sleep(200 * time.Millisecond) // for the kernel to empty the cgroups
	}
	if err := hostclean.UnmountUnder(n.root); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if err := hostclean.RemoveCgroups(n.cgroupRoot); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	_ = exec.Command("ip", "link", "del", n.bridge).Run() // exists once a pod had a network
	for _, path := range n.netns {
		if path != "" {
			_ = syscall.Unmount(path, syscall.MNT_DETACH)
			_ = os.Remove(path)
		}
	}
	n.removeNAT()
	if _, err := n.resultCache().RemoveOwned(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if t.Failed() {
		n.keepLogs()
	}
	if err := os.RemoveAll(n.root); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// removeNAT deletes the nat rules and CNI chains that name the pod CIDR,
// so that a leak the run reported does not stay on the host.
func (n *node) removeNAT() {
	out, err := commandOutput("iptables-save", "-t", "nat")
	if err != nil {
		return
	}
	chains := map[string]bool{}
	for _, rule := range NATRulesFor(out, netip.MustParsePrefix(n.cidr)) {
		f := strings.Fields(rule)
		if len(f) < 2 || f[0] != "-A" {
			continue
		}
		// iptables-save quotes comments as a shell would: let one read it.
		_ = exec.Command("sh", "-c", "iptables -t nat -D "+strings.TrimPrefix(rule, "-A ")).Run()
		if strings.HasPrefix(f[1], "CNI-") {
			chains[f[1]] = true
		}
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-j" && strings.HasPrefix(f[i+1], "CNI-") {
				chains[f[i+1]] = true
			}
		}
	}
	for c := range chains {
		_ = exec.Command("iptables", "-t", "nat", "-F", c).Run()
		_ = exec.Command("iptables", "-t", "nat", "-X", c).Run()
	}
}

// keepLogs copies berth's and containerd's logs out of the root dir before
// it is removed, so that a violation can be studied after the run.
func (n *node) keepLogs() {
	dir, err := os.MkdirTemp("", "berth-chaos-logs-")
	if err != nil {
		n.t.Logf("keeping the logs: %v", err)
		return
	}
	for _, name := range []string{"berth.log", filepath.Join("containerd", "containerd.log")} {
		data, err := os.ReadFile(filepath.Join(n.root, name))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), data, 0o600); err != nil {
			n.t.Logf("keeping %s: %v", name, err)
		}
	}
	n.t.Logf("the node's logs are kept in %s", dir)
}
