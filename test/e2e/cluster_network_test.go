package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/test/cluster"
)

// netClusterCIDR holds the pod CIDRs of this file's nodes, 10.223.N.0/24.
const netClusterCIDR = "10.223.0.0/16"

// startNetworkControlPlane is startControlPlane with the apiserver flags
// metrics-server needs as a host process, a controller-manager that gives
// each Node a /24 of netClusterCIDR and signs certificates that live
// bootstrapSigningDuration (so that they are rotated during the test), and
// the addons built.
func startNetworkControlPlane(t *testing.T) (*cluster.ControlPlane, kubernetes.Interface, cluster.Addons) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Minute)
	defer cancel()
	var buildLog strings.Builder
	addons, err := cluster.BuildAddons(ctx, &buildLog)
	if err != nil {
		t.Fatalf("building kube-proxy, CoreDNS and metrics-server: %v\n%s", err, buildLog.String())
	}
	if buildLog.Len() > 0 {
		t.Logf("build:\n%s", buildLog.String())
	}
	cp, client, _ := startControlPlaneWith(t, cluster.Options{
		APIServerArgs: cluster.MetricsServerAPIServerArgs,
		ControllerManagerArgs: []string{"--allocate-node-cidrs=true", "--cluster-cidr=" + netClusterCIDR,
			"--node-cidr-mask-size=24"},
		ClusterSigningDuration: bootstrapSigningDuration,
	})
	return cp, client, addons
}

// netNode is a berth of TestClusterNetwork and when it was started.
type netNode struct {
	*clusterNode
	started time.Time
}

// startNetworkNode starts berth-net-<i> as `kubeadm join` starts a
// kubelet: nothing but the API server's address, its CA and a bootstrap
// token (auto-approved), with client certificate rotation, the cluster's
// DNS and CIDR, and no pod CIDR of its own: it takes the Node's.
func startNetworkNode(t *testing.T, cp *cluster.ControlPlane, i int) *netNode {
	t.Helper()
	name := fmt.Sprintf("berth-net-%d", i)
	bootstrap, err := cp.BootstrapKubeconfig(t.Context(), name, cluster.AutoApprovedBootstrapGroup)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	started := time.Now()
	n := startNode(t, podCIDRFromNode,
		"--node-name", name,
		"--bootstrap-kubeconfig", bootstrap,
		"--kubeconfig", filepath.Join(t.TempDir(), "kubelet.conf"),
		"--rotate-certificates",
		"--node-ip", "127.0.0.1",
		"--port", fmt.Sprint(port),
		"--client-ca-file", cp.KubeletClientCA(),
		"--cluster-dns", cluster.ClusterDNSIP,
		"--cluster-domain", cluster.ClusterDomain,
		"--cluster-cidr", netClusterCIDR,
	)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth %s log:\n%s", name, n.logTail())
		}
	})
	return &netNode{clusterNode: &clusterNode{node: n, name: name, apiPort: port}, started: started}
}

// webAppYAML is a Deployment of replicas busybox httpds, one per node,
// each serving its pod's name on 8080, behind the Service web (port 80).
func webAppYAML(replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: %d
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: web}
      containers:
      - name: httpd
        image: %s
        imagePullPolicy: Never
        command: ["sh", "-c", "mkdir -p /www && echo $POD_NAME > /www/index.html && exec httpd -f -p 8080 -h /www"]
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        ports: [{containerPort: 8080}]
        readinessProbe:
          exec: {command: ["wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/"]}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`, replicas, busybox)
}

// clientPodYAML is a pod on node that stays up for the test's commands,
// with the default DNS policy (ClusterFirst): its resolver is the node's
// --cluster-dns.
func clientPodYAML(name, node string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: %s
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`, name, node, busybox)
}

// wgetFrom runs wget url in pod (5 s at most) and returns the page.
func wgetFrom(t *testing.T, cp *cluster.ControlPlane, pod, url string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Not wget -T: the host's busybox (Debian's 1.35, the image's) crashes
	// with it.
	out, _, err := cp.Kubectl(ctx, "exec", pod, "--", "timeout", "5", "wget", "-q", "-O-", url)
	return strings.TrimSpace(out), err
}

// TestClusterNetwork runs three berth nodes on one machine, joined to the
// real control plane, with kube-proxy (iptables mode) and CoreDNS as host
// processes, and checks what Services and cluster DNS give a pod: from a
// pod on each node the Service name answers, from a pod on another node
// among others; a pod on another node answers by pod IP; kubectl top node
// answers through metrics-server; without CoreDNS the name no longer
// resolves, without kube-proxy the Service no longer answers, while pod
// IPs still do; and kube-proxy refuses to start beside chains it did not
// create.
func TestClusterNetwork(t *testing.T) {
	cp, client, addons := startNetworkControlPlane(t)
	var joined []*netNode
	for i := 1; i <= 3; i++ {
		joined = append(joined, startNetworkNode(t, cp, i))
	}
	nodes := joinNetworkNodes(t, client, joined)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	proxy, err := cp.StartKubeProxy(ctx, addons.KubeProxy, cluster.KubeProxyOptions{ClusterCIDR: netClusterCIDR, NodeName: nodes[0].name})
	if err != nil {
		t.Fatalf("kube-proxy: %v", err)
	}
	t.Cleanup(func() { stopAddon(t, "kube-proxy", proxy.Stop) })
	dns, err := cp.StartCoreDNS(ctx, addons.CoreDNS)
	if err != nil {
		t.Fatalf("CoreDNS: %v", err)
	}
	t.Cleanup(func() { stopAddon(t, "CoreDNS", dns.Stop) })

	applyYAML(t, cp, webAppYAML(len(nodes)))
	for _, n := range nodes {
		applyYAML(t, cp, clientPodYAML("client-"+n.name, n.name))
	}
	waitDeploymentReady(t, client, "web", int32(len(nodes)), 2*time.Minute)
	for _, n := range nodes {
		waitPodRunning(t, client, "client-"+n.name, time.Minute)
	}
	web := webPodsByNode(t, client, nodes)
	before := allContainerIDs(t, client)

	t.Run("pods get the node's podCIDR and the cluster's resolver", func(t *testing.T) {
		checkPodAddressing(t, cp, nodes, web)
	})
	t.Run("service by name from every node", func(t *testing.T) {
		for _, n := range nodes {
			checkServiceFrom(t, cp, "client-"+n.name, n.name, web, "http://web.default.svc.cluster.local")
		}
		// The search path of the pod's resolv.conf completes a short name.
		if page, err := wgetFrom(t, cp, "client-"+nodes[0].name, "http://web"); err != nil || !slices.Contains(webNames(web), page) {
			t.Errorf("wget http://web = %q, %v; want one of %v", page, err, webNames(web))
		}
	})

	t.Run("pod IP across nodes", func(t *testing.T) {
		checkPodIPs(t, cp, nodes, web)
	})

	t.Run("kubectl top node", func(t *testing.T) {
		checkTopNode(t, cp, addons, nodes)
	})

	t.Run("metrics/cadvisor carries every running container", func(t *testing.T) {
		for _, n := range nodes {
			checkCadvisor(t, client, n)
		}
	})

	t.Run("client certificates rotated, nothing disturbed", func(t *testing.T) {
		checkRotationAtRest(t, cp, client, joined, web, before)
	})

	svc, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byIP := "http://" + svc.Spec.ClusterIP
	from := "client-" + nodes[1].name

	t.Run("without CoreDNS the name does not resolve", func(t *testing.T) {
		if err := dns.Stop(); err != nil {
			t.Fatalf("stop CoreDNS: %v", err)
		}
		if page, err := wgetFrom(t, cp, from, "http://web.default.svc.cluster.local"); err == nil {
			t.Errorf("without CoreDNS, wget by name answered %q", page)
		}
		if page, err := wgetFrom(t, cp, from, byIP); err != nil || !slices.Contains(webNames(web), page) {
			t.Errorf("without CoreDNS, wget %s = %q, %v; want a web pod's name", byIP, page, err)
		}
	})

	t.Run("without kube-proxy the Service does not answer", func(t *testing.T) {
		if err := proxy.Stop(); err != nil {
			t.Fatalf("stop kube-proxy: %v", err)
		}
		if out, err := exec.Command("iptables-save").Output(); err != nil || strings.Contains(string(out), "KUBE-SERVICES") {
			t.Errorf("kube-proxy's chains are still there after Stop (%v)", err)
		}
		if page, err := wgetFrom(t, cp, from, byIP); err == nil {
			t.Errorf("without kube-proxy, wget %s answered %q", byIP, page)
		}
		other := web[nodes[2].name]
		if page, err := wgetFrom(t, cp, from, "http://"+other.Status.PodIP+":8080"); err != nil || page != other.Name {
			t.Errorf("without kube-proxy, pod %s by IP = %q, %v", other.Name, page, err)
		}
	})

	t.Run("kube-proxy refuses to start beside chains it did not create", func(t *testing.T) {
		checkKubeProxyRefuses(t, cp, addons, nodes[0].name)
	})

	t.Run("kube-proxy waits for another test's, and removes a killed test's rules", func(t *testing.T) {
		checkKubeProxyRecovers(t, cp, addons, nodes[0].name)
	})
}

// checkKubeProxyRecovers holds the tests' kube-proxy lock (as another test
// running kube-proxy would): StartKubeProxy must wait for it. Then it leaves
// what a test killed while its kube-proxy ran leaves (the owner chain and a
// KUBE-* chain): StartKubeProxy must remove that chain and start.
func checkKubeProxyRecovers(t *testing.T, cp *cluster.ControlPlane, addons cluster.Addons, node string) {
	held, err := net.Listen("unix", "@berth-test-kube-proxy")
	if err != nil {
		t.Fatalf("take the kube-proxy lock: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err = cp.StartKubeProxy(ctx, addons.KubeProxy, cluster.KubeProxyOptions{ClusterCIDR: netClusterCIDR, NodeName: node})
	cancel()
	held.Close()
	if err == nil || !strings.Contains(err.Error(), "held by another test") {
		t.Fatalf("StartKubeProxy while another test holds the lock = %v, want it to wait", err)
	}

	const left = "KUBE-SEP-BERTHE2ELEFT"
	for _, chain := range [][]string{{"filter", "BERTH-TEST-KUBE-PROXY"}, {"nat", left}} {
		if out, err := exec.Command("iptables", "-t", chain[0], "-N", chain[1]).CombinedOutput(); err != nil {
			t.Fatalf("iptables -N %s: %v: %s", chain[1], err, out)
		}
	}
	t.Cleanup(func() {
		for _, chain := range [][]string{{"filter", "BERTH-TEST-KUBE-PROXY"}, {"nat", left}} {
			_ = exec.Command("iptables", "-t", chain[0], "-X", chain[1]).Run()
		}
	})
	ctx, cancel = context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kp, err := cp.StartKubeProxy(ctx, addons.KubeProxy, cluster.KubeProxyOptions{ClusterCIDR: netClusterCIDR, NodeName: node})
	if err != nil {
		t.Fatalf("StartKubeProxy after a killed test's kube-proxy: %v", err)
	}
	if exec.Command("iptables", "-t", "nat", "-S", left).Run() == nil {
		t.Errorf("the killed test's chain nat/%s is still there", left)
	}
	if err := kp.Stop(); err != nil {
		t.Fatalf("stop kube-proxy: %v", err)
	}
	if exec.Command("iptables", "-t", "filter", "-S", "BERTH-TEST-KUBE-PROXY").Run() == nil {
		t.Error("the owner chain is still there after Stop")
	}
}

// checkKubeProxyRefuses starts kube-proxy while the host has a KUBE-*
// chain of someone else's: it must refuse, and leave that chain alone.
func checkKubeProxyRefuses(t *testing.T, cp *cluster.ControlPlane, addons cluster.Addons, node string) {
	const foreign = "KUBE-BERTH-E2E-FOREIGN"
	if out, err := exec.Command("iptables", "-t", "filter", "-N", foreign).CombinedOutput(); err != nil {
		t.Fatalf("iptables -N %s: %v: %s", foreign, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("iptables", "-t", "filter", "-X", foreign).CombinedOutput(); err != nil {
			t.Errorf("iptables -X %s: %v: %s", foreign, err, out)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kp, err := cp.StartKubeProxy(ctx, addons.KubeProxy, cluster.KubeProxyOptions{ClusterCIDR: netClusterCIDR, NodeName: node})
	if err == nil {
		stopAddon(t, "kube-proxy", kp.Stop)
		t.Fatal("kube-proxy started beside a KUBE-* chain it did not create")
	}
	if !strings.Contains(err.Error(), "filter/"+foreign) {
		t.Errorf("kube-proxy's refusal = %v, want it to name filter/%s", err, foreign)
	}
	if err := exec.Command("iptables", "-t", "filter", "-L", foreign, "-n").Run(); err != nil {
		t.Errorf("the foreign chain is gone after kube-proxy's refusal: %v", err)
	}
}

// stopAddon stops an addon at the test's end, failing the test if it
// could not clean up after itself.
func stopAddon(t *testing.T, name string, stop func() error) {
	if err := stop(); err != nil {
		t.Errorf("stop %s: %v", name, err)
	}
}

func waitPodRunning(t *testing.T, client kubernetes.Interface, name string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "pod "+name+" Running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, describe(p)
	})
}

// webPodsByNode returns the web pods by node name, one on each node.
func webPodsByNode(t *testing.T, client kubernetes.Interface, nodes []*clusterNode) map[string]v1.Pod {
	t.Helper()
	web := map[string]v1.Pod{}
	for _, p := range podsOf(t, client, "web") {
		web[p.Spec.NodeName] = p
	}
	for _, n := range nodes {
		if p, ok := web[n.name]; !ok || p.Status.PodIP == "" {
			t.Fatalf("no web pod with an IP on %s: %v", n.name, webNames(web))
		}
	}
	return web
}

func webNames(web map[string]v1.Pod) []string {
	var names []string
	for _, p := range web {
		names = append(names, p.Name)
	}
	return names
}

// checkServiceFrom wgets url from pod (on node) until a web pod on another
// node has answered; every answer must be a web pod's name.
func checkServiceFrom(t *testing.T, cp *cluster.ControlPlane, pod, node string, web map[string]v1.Pod, url string) {
	t.Helper()
	var answers []string
	waitFor(t, 90*time.Second, pod+": "+url+" answered by a pod on another node", func() (bool, string) {
		page, err := wgetFrom(t, cp, pod, url)
		if err != nil {
			return false, err.Error()
		}
		answers = append(answers, page)
		for on, p := range web {
			if p.Name == page {
				return on != node, fmt.Sprintf("answers so far %v", answers)
			}
		}
		t.Errorf("%s: %s answered %q, not a web pod's name %v", pod, url, page, webNames(web))
		return true, ""
	})
	t.Logf("%s on %s: %s answered by %v", pod, node, url, answers)
}

// checkPodIPs wgets, from the client pod of each node, the web pod of
// every other node by its pod IP.
func checkPodIPs(t *testing.T, cp *cluster.ControlPlane, nodes []*clusterNode, web map[string]v1.Pod) {
	t.Helper()
	for _, from := range nodes {
		for _, to := range nodes {
			if from == to {
				continue
			}
			p := web[to.name]
			url := "http://" + p.Status.PodIP + ":8080"
			if page, err := wgetFrom(t, cp, "client-"+from.name, url); err != nil || page != p.Name {
				t.Errorf("from %s, %s (%s on %s) = %q, %v", from.name, url, p.Name, to.name, page, err)
			}
		}
	}
}

// checkTopNode starts metrics-server and waits until kubectl top node
// lists every node with its usage.
func checkTopNode(t *testing.T, cp *cluster.ControlPlane, addons cluster.Addons, nodes []*clusterNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ms, err := cp.StartMetricsServer(ctx, addons.MetricsServer)
	if err != nil {
		t.Fatalf("metrics-server: %v", err)
	}
	t.Cleanup(func() { stopAddon(t, "metrics-server", ms.Stop) })
	var out string
	waitFor(t, 2*time.Minute, "kubectl top node to list every berth node", func() (bool, string) {
		var errOut string
		out, errOut, err = cp.Kubectl(ctx, "top", "node", "--no-headers")
		if err != nil {
			return false, err.Error() + errOut
		}
		for _, n := range nodes {
			if !strings.Contains(out, n.name+" ") {
				return false, out
			}
		}
		return true, ""
	})
	for _, n := range nodes {
		for _, line := range strings.Split(out, "\n") {
			// NAME CPU(cores) CPU% MEMORY(bytes) MEMORY%: usage, not <unknown>.
			if f := strings.Fields(line); len(f) >= 4 && f[0] == n.name && (strings.Contains(line, "unknown") || !strings.HasSuffix(f[1], "m") || !strings.HasSuffix(f[3], "Mi")) {
				t.Errorf("kubectl top node for %s: %q", n.name, line)
			}
		}
	}
	t.Logf("kubectl top node:\n%s", out)
}
