package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// hostResolvConf is the node's resolver configuration the DNS tests give
// berth with --resolv-conf, in place of the machine's own.
const hostResolvConf = `# the node's resolver
nameserver 192.0.2.53
nameserver 192.0.2.54
search corp.example lab.example.
options timeout:2 ndots:2
`

// The resolv.conf containerd writes from that file for the node's DNS
// (Default, and ClusterFirst on the host network).
const hostPodResolvConf = "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions timeout:2 ndots:2\n"

// dnsTestCIDR is a pod range of the DNS tests' own, in 10.220.0.0/16.
func dnsTestCIDR() string { return fmt.Sprintf("10.220.%d.0/24", 100+rand.IntN(150)) }

// startDNSNode starts a node on its own CIDR with the test's resolv.conf
// and extra flags.
func startDNSNode(t *testing.T, extraArgs ...string) *node {
	t.Helper()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	cidr := dnsTestCIDR()
	n := startNode(t, append([]string{"--pod-cidr", cidr, "--resolv-conf", resolv}, extraArgs...)...)
	n.cidr = cidr // for the clean-up of the node's nat rules
	return n
}

// dnsPod is a static pod that sleeps, with the given spec lines added.
func dnsPod(name, spec string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
%s
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, name, spec, busybox)
}

// Each DNS policy gives the pod's /etc/resolv.conf the kubelet's content,
// with --cluster-dns, --cluster-domain and --resolv-conf; the pod's FQDN
// and /etc/hosts use the cluster domain; nameservers beyond the resolver's
// three are cut with the kubelet's DNSConfigForming event.
func TestDNSConfigPolicies(t *testing.T) {
	n := startDNSNode(t, "--cluster-dns", "10.220.0.10", "--cluster-domain", "cluster.local")
	clusterSearch := "search default.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\n"
	pods := []struct {
		name, spec, want string
	}{
		{name: "cluster-first", spec: "  hostname: web\n  subdomain: sub\n  setHostnameAsFQDN: true",
			want: clusterSearch + "nameserver 10.220.0.10\noptions ndots:5\n"},
		{name: "cluster-first-host-net", spec: "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet",
			want: clusterSearch + "nameserver 10.220.0.10\noptions ndots:5\n"},
		{name: "host-net", spec: "  hostNetwork: true", want: hostPodResolvConf},
		{name: "default", spec: "  dnsPolicy: Default", want: hostPodResolvConf},
		{name: "none", spec: `  dnsPolicy: None
  dnsConfig:
    nameservers: [1.1.1.1]
    searches: [a.example]
    options: [{name: ndots, value: "1"}, {name: edns0}]`,
			want: "search a.example\nnameserver 1.1.1.1\noptions ndots:1 edns0\n"},
		{name: "merged", spec: `  dnsConfig:
    nameservers: [10.220.0.11, 10.220.0.10]
    searches: [my.domain, cluster.local]
    options: [{name: ndots, value: "3"}, {name: debug}]`,
			want: strings.TrimSuffix(clusterSearch, "\n") + " my.domain\nnameserver 10.220.0.10\nnameserver 10.220.0.11\noptions ndots:3 debug\n"},
		{name: "too-many", spec: `  dnsPolicy: Default
  dnsConfig:
    nameservers: [9.9.9.9, 8.8.8.8]`,
			want: "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nnameserver 9.9.9.9\noptions timeout:2 ndots:2\n"},
	}
	for _, p := range pods {
		n.writeManifest(p.name+".yaml", dnsPod(p.name, p.spec))
	}
	for _, p := range pods {
		pod := n.waitRunning(p.name, 2*time.Minute)
		if got := n.exec(pod, "main", "cat", "/etc/resolv.conf"); got != p.want {
			t.Errorf("%s: /etc/resolv.conf:\n%s\nwant:\n%s", p.name, got, p.want)
		}
	}
	pod := n.waitRunning("cluster-first", time.Minute)
	if got := strings.TrimSpace(n.exec(pod, "main", "hostname")); got != "web.sub.default.svc.cluster.local" {
		t.Errorf("hostname = %q, want the FQDN in the cluster domain", got)
	}
	if hosts := n.exec(pod, "main", "cat", "/etc/hosts"); !strings.Contains(hosts, "\tweb.sub.default.svc.cluster.local\tweb\n") {
		t.Errorf("/etc/hosts lacks the pod's FQDN:\n%s", hosts)
	}
	const forming = "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 192.0.2.53 192.0.2.54 9.9.9.9"
	waitFor(t, 30*time.Second, "the DNSConfigForming event", func() (bool, string) {
		evs := n.apiPodEvents("too-many-" + nodeName)
		return hasDNSEvent(evs, "DNSConfigForming", forming), fmt.Sprint(dnsEventLines(evs))
	})
	if evs := n.apiPodEvents("cluster-first-" + nodeName); hasDNSEvent(evs, "MissingClusterDNS", "") {
		t.Errorf("MissingClusterDNS on a node with cluster DNS: %v", dnsEventLines(evs))
	}
}

// A node without --cluster-dns gives ClusterFirst pods the node's resolver
// and records the kubelet's MissingClusterDNS warning on the pod and on the
// node.
func TestDNSMissingClusterDNS(t *testing.T) {
	n := startDNSNode(t, "--cluster-domain", "cluster.local")
	n.writeManifest("cf.yaml", dnsPod("cf", ""))
	pod := n.waitRunning("cf", 2*time.Minute)
	if got := n.exec(pod, "main", "cat", "/etc/resolv.conf"); got != hostPodResolvConf {
		t.Errorf("/etc/resolv.conf:\n%s\nwant the node's:\n%s", got, hostPodResolvConf)
	}
	const msg = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	podMsg := fmt.Sprintf("pod: %q. %s", fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID), msg)
	waitFor(t, 30*time.Second, "the MissingClusterDNS events", func() (bool, string) {
		pe, ne := n.apiPodEvents(pod.Name), n.nodeEvents()
		return hasDNSEvent(pe, "MissingClusterDNS", podMsg) && hasDNSEvent(ne, "MissingClusterDNS", msg),
			fmt.Sprintf("pod: %v; node: %v", dnsEventLines(pe), dnsEventLines(ne))
	})
}

// Bad DNS options stop start-up with the field and the reason named, and
// leave the root dir untouched.
func TestDNSConfigRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS: [10.96.0.10, kube-dns]\n")
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"--cluster-dns", "10.220.0.10,10.220.0.300"}, want: `clusterDNS (--cluster-dns): [1] "10.220.0.300" is not an IP address`},
		{args: []string{"--config", cfg}, want: `clusterDNS (--cluster-dns): [1] "kube-dns" is not an IP address`},
		{args: []string{"--cluster-domain", "Cluster_Local"}, want: `clusterDomain (--cluster-domain): "Cluster_Local" is not a valid DNS domain (RFC 1123)`},
		{args: []string{"--resolv-conf", filepath.Join(dir, "absent.conf")},
			want: "resolvConf (--resolv-conf): open " + filepath.Join(dir, "absent.conf") + ": no such file or directory"},
	}
	for _, tt := range tests {
		root := t.TempDir()
		// A berth that starts all the same (one that does not know the
		// options) runs on its own cgroup root, CIDR and bridge, and the
		// containerd it leaves when killed is stopped.
		cgroupRoot := fmt.Sprintf("/berth-e2e-%08x", rand.Uint32())
		t.Cleanup(func() { killLeftovers(t, root); removeCgroups(t, cgroupRoot) })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		args := append([]string{"run", "--root-dir", root, "--read-only-port", "0",
			"--cgroup-root", cgroupRoot, "--pod-cidr", dnsTestCIDR(), "--cni-bridge", fmt.Sprintf("be2e%04x", rand.IntN(0xffff)),
			"--pause-binary", filepath.Join(bins, "berth-pause")}, tt.args...)
		out, err := exec.CommandContext(ctx, filepath.Join(bins, "berth"), args...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%v: berth must refuse to start with %q: %v\n%s", tt.args, tt.want, err, out)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("%v: a refused start-up must not touch the root dir, found %v", tt.args, entries)
		}
	}
}

// hasDNSEvent reports whether evs hold a Warning with reason and, unless
// message is empty, that message.
func hasDNSEvent(evs []v1.Event, reason, message string) bool {
	for _, e := range evs {
		if e.Type == v1.EventTypeWarning && e.Reason == reason && (message == "" || e.Message == message) {
			return true
		}
	}
	return false
}

func dnsEventLines(evs []v1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out
}
