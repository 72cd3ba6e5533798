package e2e

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The CNI state a sandbox leaves when nothing tears it down: the bridge
// plugin's masquerade chain and POSTROUTING jump, portmap's DNAT chain
// and its entry rule, host-local's lease (issue #19, item 9). berth must
// collect its own network's, on its own pod CIDR, and nothing else.
//
//   - victim, a real pod, leaks for real: its netns is removed under it,
//     so containerd's CNI DEL has no netns, and the bridge plugin then
//     releases the lease but keeps the masquerade chain;
//   - a fabricated sandbox of berth's network on the node's CIDR leaks
//     all four kinds of state;
//   - a live pod with a host port, another network's rule on the node's
//     CIDR, and a rule of berth's name for an address outside the CIDR
//     (another berth's) must stay.
//
// berth is killed (-9) and started again: its start-up collects. Then a
// second fabricated sandbox is collected when containerd is killed and the
// supervisor has started it again.
func TestNetworkGCRemovesOrphanedCNIState(t *testing.T) {
	n := startNode(t)
	cidr := netip.MustParsePrefix(n.cidr)
	tag := fmt.Sprintf("%08x", rand.Uint32())
	fake := sandboxLeak{net: "berth", id: "cnigc-e2e-fake-" + tag, ip: nthAddr(cidr, 250), cidr: n.cidr,
		hostPort: freePort(t), lease: true}
	fake2 := sandboxLeak{net: "berth", id: "cnigc-e2e-fake2-" + tag, ip: nthAddr(cidr, 249), cidr: n.cidr, lease: true}
	other := sandboxLeak{net: "cnigc-e2e-other", id: "cnigc-e2e-other-" + tag, ip: nthAddr(cidr, 251), cidr: n.cidr}
	outside := sandboxLeak{net: "berth", id: "cnigc-e2e-outside-" + tag, ip: "198.51.100.7", cidr: "198.51.100.0/24"}
	var victimID string
	// Registered after startNode's: runs first, while berth's node is up.
	t.Cleanup(func() {
		for _, l := range []sandboxLeak{fake, fake2, other, outside, {net: "berth", id: victimID}} {
			if l.id != "" {
				dropNAT(t, l)
			}
		}
	})

	port := freePort(t)
	n.writeManifest("live.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: live}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /tmp/www && echo live > /tmp/www/index.html && exec httpd -f -p 80 -h /tmp/www"]
    ports: [{containerPort: 80, hostPort: %d}]
`, busybox, port))
	n.writeManifest("victim.yaml", sleeper("victim", "1"))
	live := n.waitRunning("live", 90*time.Second)
	victim := n.waitRunning("victim", 90*time.Second)
	liveID := n.sandboxID(live)
	victimID = n.sandboxID(victim)
	liveLeak := sandboxLeak{net: "berth", id: liveID, ip: live.Status.PodIP}
	if !natHolds(t, liveLeak.masqChain()) || !natHolds(t, liveLeak.dnatChain()) {
		t.Fatalf("the live pod has no masquerade or DNAT chain:\n%s", natOf(t, liveID))
	}

	// The victim's netns goes first: its DEL then comes without one.
	netns := n.sandboxNetns(victimID)
	if err := syscall.Unmount(netns, syscall.MNT_DETACH); err != nil {
		t.Fatalf("unmount the victim's netns %s: %v", netns, err)
	}
	if err := os.Remove(netns); err != nil {
		t.Fatal(err)
	}
	n.removeManifest("victim.yaml")
	waitFor(t, 60*time.Second, "the victim's sandbox removed", func() (bool, string) {
		sbs := n.sandboxes(string(victim.UID))
		return len(sbs) == 0, fmt.Sprintf("%d sandboxes", len(sbs))
	})
	victimChain := sandboxLeak{net: "berth", id: victimID}.masqChain()
	if !natHolds(t, victimChain) {
		t.Fatalf("the victim's masquerade chain %s went with its sandbox: no leak to collect", victimChain)
	}

	for _, l := range []sandboxLeak{fake, other, outside} {
		l.create(t, n.root)
	}
	n.kill9()
	n.start()
	n.waitCollected(fake, victimChain)
	if !hasEvent(n.nodeEvents(), v1.EventTypeNormal, "PodNetworkStateCollected", victimID[:12]) {
		t.Errorf("no node event for the victim's network state; node events: %+v", n.nodeEvents())
	}
	n.wantUntouched(live, liveLeak, other, outside)

	// containerd dies and comes back: what it never knew is collected.
	fake2.create(t, n.root)
	pid := n.containerdPid()
	if pid <= 1 {
		t.Fatal("no containerd pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.waitCollected(fake2, "")
	n.wantUntouched(live, liveLeak, other, outside)
	for _, line := range strings.Split(n.berthLog(), "\n") {
		if strings.Contains(line, "network-gc") {
			t.Log(line)
		}
	}
}

// sandboxLeak is the CNI state of one sandbox, as the plugins write it.
type sandboxLeak struct {
	net, id, ip string
	cidr        string // the masquerade chain's ACCEPT
	hostPort    int    // 0: no portmap state
	lease       bool   // a lease in the node's IPAM dir
}

func (l sandboxLeak) hash(prefix string) string {
	sum := sha512.Sum512([]byte(l.net + l.id))
	return (prefix + hex.EncodeToString(sum[:]))[:28]
}

// masqChain and dnatChain are named as the plugins name them (utils.
// FormatChainName, MustFormatChainNameWithPrefix).
func (l sandboxLeak) masqChain() string { return l.hash("CNI-") }
func (l sandboxLeak) dnatChain() string { return l.hash("CNI-DN-") }

func (l sandboxLeak) comment() string {
	return fmt.Sprintf(`"name: \"%s\" id: \"%s\""`, l.net, l.id)
}

// create writes l's state as the plugins would, and its lease in the
// node's IPAM dir.
func (l sandboxLeak) create(t *testing.T, root string) {
	t.Helper()
	c := l.masqChain()
	script := fmt.Sprintf("*nat\n:%s - [0:0]\n-A %s -d %s -m comment --comment %s -j ACCEPT\n"+
		"-A %s ! -d 224.0.0.0/4 -m comment --comment %s -j MASQUERADE\n"+
		"-A POSTROUTING -s %s/32 -m comment --comment %s -j %s\n",
		c, c, l.cidr, l.comment(), c, l.comment(), l.ip, l.comment(), c)
	if l.hostPort != 0 {
		d := l.dnatChain()
		script += fmt.Sprintf(":%s - [0:0]\n-A %s -s %s/32 -p tcp -m tcp --dport %d -j CNI-HOSTPORT-SETMARK\n"+
			"-A %s -p tcp -m tcp --dport %d -j DNAT --to-destination %s:80\n"+
			"-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"%s\\\" id: \\\"%s\\\"\" -m multiport --dports %d -j %s\n",
			d, d, l.ip, l.hostPort, d, l.hostPort, l.ip, l.net, l.id, l.hostPort, d)
	}
	restoreNAT(t, script+"COMMIT\n")
	if l.lease {
		dir := filepath.Join(root, "cni", "ipam", "berth")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, l.ip), []byte(l.id+"\r\neth0"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func restoreNAT(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("iptables-restore", "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("iptables-restore: %v: %s\n%s", err, out, script)
	}
}

// natOf returns the nat rules and chain declarations that name id or its
// chains.
func natOf(t testing.TB, id string) string {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(iptablesSave(t, "-t", "nat"), "\n") {
		if strings.Contains(line, id) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// natHolds reports whether the nat table has a line containing s.
func natHolds(t testing.TB, s string) bool {
	t.Helper()
	return natOf(t, s) != ""
}

// dropNAT removes whatever is left of l's rules and chains, each on its
// own so that one already gone does not keep the others.
func dropNAT(t *testing.T, l sandboxLeak) {
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Errorf("cleanup: iptables-save: %v", err)
		return
	}
	chains := []string{l.masqChain(), l.dnatChain()}
	var cmds []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-A ") && strings.Contains(line, `id: \"`+l.id+`\"`) {
			cmds = append(cmds, "-D "+strings.TrimPrefix(line, "-A "))
		}
	}
	for _, c := range chains {
		if strings.Contains(string(out), ":"+c+" ") {
			cmds = append(cmds, "-F "+c, "-X "+c)
		}
	}
	for _, c := range cmds {
		cmd := exec.Command("iptables-restore", "-w", "5", "--noflush")
		cmd.Stdin = strings.NewReader("*nat\n" + c + "\nCOMMIT\n")
		_ = cmd.Run()
	}
}

// nthAddr is the n-th address of p.
func nthAddr(p netip.Prefix, n int) string {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a.String()
}

func (n *node) sandboxID(pod *v1.Pod) string {
	n.t.Helper()
	sbs := n.sandboxes(string(pod.UID))
	if len(sbs) != 1 {
		n.t.Fatalf("%s has %d sandboxes, want 1", pod.Name, len(sbs))
	}
	return sbs[0].Id
}

// sandboxNetns is the network namespace of a sandbox, from containerd's
// verbose status (the sandbox's OCI spec).
func (n *node) sandboxNetns(id string) string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.cri.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		n.t.Fatalf("sandbox status: %v", err)
	}
	const key = `"type":"network","path":"`
	info := strings.ReplaceAll(resp.Info["info"], " ", "")
	i := strings.Index(info, key)
	if i < 0 {
		n.t.Fatalf("no network namespace in the sandbox's info")
	}
	path, _, _ := strings.Cut(info[i+len(key):], `"`)
	return path
}

// waitCollected waits until l's state and the chain extra (if any) are
// gone: rules, chains and lease.
func (n *node) waitCollected(l sandboxLeak, extra string) {
	n.t.Helper()
	lease := filepath.Join(n.root, "cni", "ipam", "berth", l.ip)
	waitFor(n.t, 90*time.Second, "the orphaned CNI state collected", func() (bool, string) {
		left := natOf(n.t, l.id)
		for _, c := range []string{l.masqChain(), l.dnatChain(), extra} {
			if c != "" && natHolds(n.t, c) {
				left += "\n" + natOf(n.t, c)
			}
		}
		if _, err := os.Stat(lease); err == nil {
			left += "\nlease " + lease
		}
		return strings.TrimSpace(left) == "", left
	})
}

// wantUntouched checks that the live pod runs in the same sandbox with its
// rules and lease, and that the foreign state is all there.
func (n *node) wantUntouched(live *v1.Pod, liveLeak sandboxLeak, foreign ...sandboxLeak) {
	n.t.Helper()
	now := n.waitRunning("live", 60*time.Second)
	if id := n.sandboxID(now); id != liveLeak.id {
		n.t.Errorf("the live pod's sandbox changed: %s, was %s", id, liveLeak.id)
	}
	for _, c := range []string{liveLeak.masqChain(), liveLeak.dnatChain(), `id: \"` + liveLeak.id + `\"`} {
		if !natHolds(n.t, c) {
			n.t.Errorf("the live pod's %s is gone", c)
		}
	}
	if _, err := os.Stat(filepath.Join(n.root, "cni", "ipam", "berth", live.Status.PodIP)); err != nil {
		n.t.Errorf("the live pod's lease: %v", err)
	}
	for _, f := range foreign {
		if !natHolds(n.t, f.masqChain()) || !natHolds(n.t, `id: \"`+f.id+`\"`) {
			n.t.Errorf("state that is not this node's network's was removed: %s %s", f.net, f.id)
		}
	}
}
