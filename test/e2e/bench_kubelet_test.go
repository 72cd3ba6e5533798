package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/bench"
	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/test/cluster"
)

// TestBenchKubeletNode runs the upstream kubelet (v1.36.3, built as an
// addon) the way the performance harness will run it beside berth: in
// standalone mode on a containerd of its own with berth's bridge CNI. A
// busybox static pod on the pod network must run and go, and once the node
// is closed nothing of it may be left on the host: no process, mount or
// cgroup, no bridge, no KUBE- iptables chain that was not there before, no
// kernel tunable the kubelet changed.
func TestBenchKubeletNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Minute)
	defer cancel()
	var buildLog strings.Builder
	addons, err := cluster.BuildAddons(ctx, &buildLog)
	if err != nil {
		t.Fatalf("building the addons: %v\n%s", err, buildLog.String())
	}
	chainsBefore := kubeChainLines(t)
	sysctlsBefore := kubeletSysctlValues(t)
	fixedBefore := fixedDirsThere()

	startCtx, cancelStart := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelStart()
	started := time.Now()
	k, err := bench.StartKubeletNode(startCtx, bench.KubeletOptions{
		Kubelet: addons.Kubelet, BinDir: bins, Busybox: busyboxPath,
	})
	if err != nil {
		t.Fatalf("start the kubelet node: %v", err)
	}
	t.Logf("kubelet node up in %v", time.Since(started).Round(time.Millisecond))
	dir, cgroupRoot, bridge := k.Host()
	closed := false
	t.Cleanup(func() {
		if !closed {
			if err := k.Close(); err != nil {
				t.Errorf("cleanup: close the kubelet node: %v", err)
			}
		}
	})

	runAndRemoveStaticPod(t, ctx, k, cgroupRoot)
	if !slices.ContainsFunc(kubeChainLines(t), func(l string) bool { return strings.Contains(l, ":KUBE-KUBELET-CANARY") }) {
		t.Error("no KUBE-KUBELET-CANARY chain while the kubelet ran: the iptables clean-up is not exercised")
	}

	closed = true
	if err := k.Close(); err != nil {
		t.Fatalf("close the kubelet node: %v", err)
	}
	checkKubeletNodeGone(t, dir, cgroupRoot, bridge)
	if got := kubeChainLines(t); !slices.Equal(got, chainsBefore) {
		t.Errorf("KUBE- chains after close:\n%s\nbefore:\n%s", strings.Join(got, "\n"), strings.Join(chainsBefore, "\n"))
	}
	if got := kubeletSysctlValues(t); !slices.Equal(got, sysctlsBefore) {
		t.Errorf("kernel tunables after close %v, before %v", got, sysctlsBefore)
	}
	if got := fixedDirsThere(); !slices.Equal(got, fixedBefore) {
		t.Errorf("of the kubelet's fixed dirs, these are there after close: %v, before: %v", got, fixedBefore)
	}
}

// fixedDirsThere lists which of the dirs the kubelet uses whatever its
// root dir (its device plugin socket's, its containers' log links') are
// there.
func fixedDirsThere() []string {
	var out []string
	for _, d := range []string{"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/log/containers"} {
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// runAndRemoveStaticPod writes a busybox pod on the pod network, waits for
// it to run with an address of the bridge network, then removes it and
// waits until the runtime has no sandbox left.
func runAndRemoveStaticPod(t *testing.T, ctx context.Context, k *bench.KubeletNode, cgroupRoot string) {
	t.Helper()
	const manifest = `apiVersion: v1
kind: Pod
metadata: {name: kl-smoke, namespace: bench}
spec:
  hostNetwork: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: idle
    image: berth.local/busybox:bench
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`
	if err := k.WriteManifest("kl-smoke.yaml", manifest); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	name := k.PodName("kl-smoke")
	var pod v1.Pod
	err := pollUntil(ctx, 2*time.Minute, func() bool {
		pods, err := k.Pods(ctx)
		if err != nil {
			return false
		}
		for _, p := range pods {
			if p.Name == name && p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" {
				pod = p
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("pod %s not Running with an IP on the kubelet's /pods: %v\n%s", name, err, k.LogTail())
	}
	t.Logf("pod %s Running at %s %v after its manifest", name, pod.Status.PodIP, time.Since(written).Round(time.Millisecond))
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !ip.IsPrivate() || ip.IsLoopback() {
		t.Errorf("pod IP %q: not one of the bridge network's", pod.Status.PodIP)
	}
	if _, err := os.Lstat("/var/lib/kubelet/device-plugins/kubelet.sock"); err != nil {
		t.Errorf("the kubelet's device plugin socket while it runs: %v", err)
	}
	if links, _ := filepath.Glob("/var/log/containers/" + name + "_*"); len(links) != 1 {
		t.Errorf("log links of %s while it runs: %v, want 1", name, links)
	}
	if natOfKubeletNetwork(t) == "" {
		t.Error("no NAT rule of the kubelet's network while its pod runs: the NAT clean-up is not exercised")
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", cgroupRoot, "kubepods")); err != nil {
		t.Errorf("the kubelet's kubepods cgroup under its cgroup root: %v", err)
	}

	removed := time.Now()
	if err := k.ClearManifests(ctx, 2*time.Minute); err != nil {
		t.Fatalf("sandboxes left after the manifest went: %v\n%s", err, k.LogTail())
	}
	t.Logf("no sandbox left %v after the manifest went", time.Since(removed).Round(time.Millisecond))
	err = pollUntil(ctx, time.Minute, func() bool {
		pods, err := k.Pods(ctx)
		return err == nil && len(pods) == 0
	})
	if err != nil {
		t.Errorf("the kubelet's /pods still lists pods: %v", err)
	}
}

// checkKubeletNodeGone fails the test for anything of the node left on the
// host after Close.
func checkKubeletNodeGone(t *testing.T, dir, cgroupRoot, bridge string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the node's dir %s is still there (%v)", dir, err)
	}
	if mounts, err := hostclean.MountsUnder(dir); err != nil || len(mounts) > 0 {
		t.Errorf("mounts left under %s: %v (%v)", dir, mounts, err)
	}
	if out, err := exec.Command("pgrep", "-a", "-f", dir+"/").Output(); err == nil {
		t.Errorf("processes of the node left:\n%s", out)
	}
	for _, m := range hostclean.CgroupMounts() {
		if _, err := os.Stat(filepath.Join(m, cgroupRoot)); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left (%v)", filepath.Join(m, cgroupRoot), err)
		}
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("bridge %s left", bridge)
	}
	if _, err := os.Lstat("/var/lib/kubelet/device-plugins/kubelet.sock"); err == nil {
		t.Error("the kubelet's device plugin socket left")
	}
	links, _ := filepath.Glob("/var/log/containers/*")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+"/") {
			t.Errorf("log link %s -> %s left", l, target)
		}
	}
	if nat := natOfKubeletNetwork(t); nat != "" {
		t.Errorf("NAT rules of the kubelet's network left:\n%s", nat)
	}
}

// natOfKubeletNetwork returns the NAT rules of the kubelet's CNI network:
// the bridge plugin's masquerade rules name their network.
func natOfKubeletNetwork(t *testing.T) string {
	t.Helper()
	nat, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(nat), "\n") {
		if strings.Contains(line, `name: \"bench-kubelet\"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// kubeChainLines lists the KUBE- chains of the filter, nat and mangle
// tables of both iptables families, as "family table :CHAIN", sorted.
func kubeChainLines(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, family := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			save, err := exec.Command(family+"-save", "-t", table).Output()
			if err != nil {
				t.Fatalf("%s-save -t %s: %v", family, table, err)
			}
			for line := range strings.SplitSeq(string(save), "\n") {
				if strings.HasPrefix(line, ":KUBE-") {
					out = append(out, family+" "+table+" "+strings.Fields(line)[0])
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// kubeletSysctlValues reads the kernel tunables the kubelet sets at start.
func kubeletSysctlValues(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		data, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k+"="+strings.TrimSpace(string(data)))
	}
	return out
}

// pollUntil calls done every 200ms until it reports true or timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
