package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/network"
)

// podnetClusterCIDR holds every pod CIDR of these tests (issue #22's range).
const podnetClusterCIDR = "10.222.0.0/16"

// podnetCIDR picks a /24 of the cluster CIDR for a standalone node: from
// 10.222.100.0 up, away from the controller-manager's allocations (which
// start at 10.222.0.0).
func podnetCIDR() string { return fmt.Sprintf("10.222.%d.0/24", 100+rand.IntN(150)) }

// echoServer is a pod whose httpd answers /cgi-bin/ip with the address the
// request came from (busybox httpd's CGI REMOTE_ADDR).
func echoServer(name string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && exec httpd -f -p 80 -h /www"]
`, name, busybox)
}

// cleanupPodnet removes what a podnet test's berth leaves on the host
// beyond what the node's own clean-up removes: the bridges of its other
// ranges (base is the node's own) and its masquerade chains.
func cleanupPodnet(t *testing.T, base string, cidrs ...string) {
	t.Cleanup(func() {
		for _, cidr := range cidrs {
			other := network.BridgeFor(base, cidr, []netip.Prefix{netip.MustParsePrefix("0.0.0.1/32")})
			if err := exec.Command("ip", "link", "del", other).Run(); err == nil {
				t.Logf("cleanup: deleted bridge %s of %s", other, cidr)
			}
			removeMasqChain(t, cidr)
			removeNATOf(t, cidr)
		}
	})
}

// removeMasqChain removes berth's masquerade chain of cidr and its jump.
func removeMasqChain(t testing.TB, cidr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	save, err := cnigc.IPTables{}.SaveNAT(ctx)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	nat, err := cnigc.ParseNAT(save)
	if err != nil || !nat.Chains[network.MasqChain(cidr)] {
		return
	}
	var jumps []string
	for _, r := range nat.Rules {
		if r.Chain == "POSTROUTING" && r.Jump() == network.MasqChain(cidr) {
			jumps = append(jumps, r.Line)
		}
	}
	if err := (cnigc.IPTables{}).Restore(ctx, network.UnmasqueradeScript(cidr, jumps)); err != nil {
		t.Errorf("cleanup: masquerade chain of %s: %v", cidr, err)
	}
}

// startPodnetNode starts a node on cidr in the cluster CIDR.
func startPodnetNode(t *testing.T, cidr string, extraArgs ...string) *node {
	t.Helper()
	return startNode(t, append([]string{"--pod-cidr", cidr}, extraArgs...)...)
}

func inCIDR(t *testing.T, ip, cidr string) bool {
	t.Helper()
	a, err := netip.ParseAddr(ip)
	if err != nil {
		t.Fatalf("pod IP %q: %v", ip, err)
	}
	return netip.MustParsePrefix(cidr).Contains(a)
}

// Pods on two berth nodes of one machine, each with its own bridge and
// CIDR, reach each other by pod IP, and with --cluster-cidr the server
// sees the client pod's own address: no NAT between pods (issue #22,
// item 1). The bridge plugin's ipMasq alone would rewrite it to the
// server bridge's gateway address.
func TestPodNetworkAcrossNodes(t *testing.T) {
	cidrA, cidrB := podnetCIDR(), podnetCIDR()
	for cidrB == cidrA {
		cidrB = podnetCIDR()
	}
	a := startPodnetNode(t, cidrA, "--cluster-cidr", podnetClusterCIDR)
	cleanupPodnet(t, a.bridge, cidrA)
	b := startPodnetNode(t, cidrB, "--cluster-cidr", podnetClusterCIDR)
	cleanupPodnet(t, b.bridge, cidrB)

	a.writeManifest("server.yaml", echoServer("server"))
	b.writeManifest("client.yaml", sleeper("client", "1"))
	server := a.waitRunning("server", 90*time.Second)
	client := b.waitRunning("client", 90*time.Second)
	if !inCIDR(t, server.Status.PodIP, cidrA) || !inCIDR(t, client.Status.PodIP, cidrB) {
		t.Fatalf("pod IPs outside their nodes' CIDRs: server %s (%s), client %s (%s)",
			server.Status.PodIP, cidrA, client.Status.PodIP, cidrB)
	}
	var seen string
	waitFor(t, 30*time.Second, "the client's wget to the server's pod IP", func() (bool, string) {
		id := containerID(t, client, "main")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		out, errOut, code, err := b.cri.ExecSync(ctx, id,
			[]string{"wget", "-O", "-", "http://" + server.Status.PodIP + "/cgi-bin/ip"}, 10*time.Second)
		// busybox httpd listens on IPv6 and writes "[::ffff:a.b.c.d]".
		seen = strings.TrimPrefix(strings.Trim(strings.TrimSpace(string(out)), "[]"), "::ffff:")
		return err == nil && code == 0 && seen != "", fmt.Sprintf("code %d, err %v, stderr %s", code, err, errOut)
	})
	if seen != client.Status.PodIP {
		t.Fatalf("the server saw the request come from %s, not from the client pod %s: pod-to-pod traffic was NATed", seen, client.Status.PodIP)
	}
}

// A podCIDR that changes while pods run (here: berth restarted with
// another --pod-cidr): the running pod keeps its address and its sandbox,
// a new pod gets the new range, on a bridge of its own, and the two reach
// each other.
func TestPodNetworkPodCIDRChange(t *testing.T) {
	oldCIDR, newCIDR := podnetCIDR(), podnetCIDR()
	for newCIDR == oldCIDR {
		newCIDR = podnetCIDR()
	}
	n := startPodnetNode(t, oldCIDR)
	cleanupPodnet(t, n.bridge, oldCIDR, newCIDR)
	n.writeManifest("old.yaml", echoServer("old"))
	old := n.waitRunning("old", 90*time.Second)
	if !inCIDR(t, old.Status.PodIP, oldCIDR) {
		t.Fatalf("old pod %s is outside %s", old.Status.PodIP, oldCIDR)
	}
	oldSandbox := n.sandboxID(old)

	n.stop()
	n.extraArgs = append(n.extraArgs, "--pod-cidr", newCIDR)
	n.start()
	n.writeManifest("new.yaml", sleeper("new", "1"))
	fresh := n.waitRunning("new", 90*time.Second)
	if !inCIDR(t, fresh.Status.PodIP, newCIDR) {
		t.Fatalf("new pod %s is outside the new range %s", fresh.Status.PodIP, newCIDR)
	}
	again := n.pod("old")
	if again == nil || again.Status.PodIP != old.Status.PodIP || n.sandboxID(again) != oldSandbox {
		t.Fatalf("the old pod lost its address or sandbox: was %s in %s, now %+v", old.Status.PodIP, oldSandbox, again)
	}
	out := n.exec(fresh, "main", "wget", "-O", "-", "http://"+old.Status.PodIP+"/cgi-bin/ip")
	if strings.TrimSpace(out) == "" {
		t.Fatal("the new pod got no answer from the old one")
	}
}

// hostConf writes a CNI conflist of the test's own into dir: a bridge on
// cidr whose leases live in ipamDir.
func hostConf(t *testing.T, dir, name, bridge, cidr, ipamDir string) {
	t.Helper()
	conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}`, name, bridge, cidr, ipamDir)
	writeAtomically(t, filepath.Join(dir, "10-"+name+".conflist"), conf)
}

func writeAtomically(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// nodeReadyCondition is /node's Ready condition.
func (n *node) nodeReadyCondition() v1.NodeCondition {
	n.t.Helper()
	var node v1.Node
	n.getJSON("/node", &node)
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c
		}
	}
	n.t.Fatal("/node has no Ready condition")
	return v1.NodeCondition{}
}

// With --cni-conf-dir, berth's managed containerd uses the host's CNI
// configuration (here a temp dir's, never /etc/cni/net.d) instead of
// berth's bridge. When that configuration turns invalid, the node is
// NotReady with NetworkReady=false naming the file and the reason, the
// running pod keeps running with its address, and a new pod waits with a
// NetworkNotReady event; once the configuration is fixed, it starts.
func TestPodNetworkHostCNIConf(t *testing.T) {
	confDir, ipamDir := t.TempDir(), t.TempDir()
	tag := fmt.Sprintf("%04x", rand.IntN(0xffff))
	name, bridge, cidr := "podnet-e2e-"+tag, "pne2e"+tag, podnetCIDR()
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", bridge).Run()
		rc := cnigc.ResultCache{Dir: cnigc.DefaultResultsDir, Network: name, IPAMDir: ipamDir}
		if removed, err := rc.RemoveOwned(); err != nil || removed > 0 {
			t.Logf("cleanup: removed %d cached CNI results: %v", removed, err)
		}
	})
	hostConf(t, confDir, name, bridge, cidr, ipamDir)
	n := startNode(t, "--cni-conf-dir", confDir, "--cni-bin-dir", "/usr/lib/cni")

	n.writeManifest("first.yaml", sleeper("first", "1"))
	first := n.waitRunning("first", 90*time.Second)
	if !inCIDR(t, first.Status.PodIP, cidr) {
		t.Fatalf("pod IP %s is not from the host configuration's range %s: berth's own network was used", first.Status.PodIP, cidr)
	}
	if _, err := os.Stat(filepath.Join(n.root, "cni", "net.d", network.ConfListName)); err == nil {
		t.Error("berth wrote its own conflist although the host has a CNI configuration")
	}
	firstSandbox := n.sandboxID(first)

	confFile := filepath.Join(confDir, "10-"+name+".conflist")
	good, err := os.ReadFile(confFile)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever happens below, the node's clean-up needs the network to
	// tear the sandboxes down.
	t.Cleanup(func() { writeAtomically(t, confFile, string(good)) })
	writeAtomically(t, confFile, `{"cniVersion": "1.0.0", "name": "broken", "plugins": [{"bridge": "x"}]}`)
	waitFor(t, 60*time.Second, "the node NotReady for the invalid CNI configuration", func() (bool, string) {
		c := n.nodeReadyCondition()
		return c.Status == v1.ConditionFalse && strings.Contains(c.Message, "NetworkReady=false") &&
			strings.Contains(c.Message, confFile) && strings.Contains(c.Message, `"plugins[0].type"`), c.Message
	})
	n.writeManifest("second.yaml", sleeper("second", "1"))
	waitFor(t, 60*time.Second, "the new pod's NetworkNotReady event", func() (bool, string) {
		if n.pod("second") == nil {
			return false, "no pod yet"
		}
		evs := n.events("second")
		return hasEvent(evs, v1.EventTypeWarning, "NetworkNotReady", "network is not ready"), fmt.Sprintf("%+v", evs)
	})
	if p := n.pod("second"); p == nil || p.Status.Phase == v1.PodRunning || len(n.sandboxes(string(p.UID))) > 0 {
		t.Fatalf("the new pod did not wait for the network: %+v", p)
	}
	still := n.pod("first")
	if still == nil || still.Status.Phase != v1.PodRunning || still.Status.PodIP != first.Status.PodIP || n.sandboxID(still) != firstSandbox {
		t.Fatalf("the running pod was disturbed by the invalid configuration: %+v", still)
	}
	n.exec(still, "main", "true")

	writeAtomically(t, confFile, string(good))
	second := n.waitRunning("second", 120*time.Second)
	if !inCIDR(t, second.Status.PodIP, cidr) || second.Status.PodIP == first.Status.PodIP {
		t.Fatalf("second pod IP %s (first %s, range %s)", second.Status.PodIP, first.Status.PodIP, cidr)
	}
	if slices.Contains([]string{"", first.Status.PodIP}, second.Status.PodIP) {
		t.Fatal("second pod has no address of its own")
	}
}
