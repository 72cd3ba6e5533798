package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/berth-dev/berth/test/cluster"
)

// joinNetworkNodes waits until each node is Ready with its pods' network on
// the range the controller-manager gave its Node, logs how long each took
// from `berth run --bootstrap-kubeconfig` to Ready, and returns them.
func joinNetworkNodes(t *testing.T, client kubernetes.Interface, joined []*netNode) []*clusterNode {
	t.Helper()
	var nodes []*clusterNode
	for _, n := range joined {
		node := waitNodeReady(t, client, n.name, true, 3*time.Minute)
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				// The condition's time is berth's own clock, as is started.
				t.Logf("node %s: from `berth run --bootstrap-kubeconfig` to Node Ready: %s (to the second)",
					n.name, c.LastTransitionTime.Sub(n.started).Round(100*time.Millisecond))
			}
		}
		n.cidr = waitNodePodCIDR(t, client, n.clusterNode) // and what the clean-up removes
		cleanupPodnet(t, n.bridge, n.cidr)
		nodes = append(nodes, n.clusterNode)
	}
	return nodes
}

// allContainerIDs is every container of the default namespace's pods, by
// pod and container, with its restart count.
func allContainerIDs(t *testing.T, client kubernetes.Interface) map[string]string {
	t.Helper()
	pods, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name+"/"+cs.Name] = fmt.Sprintf("%s restarts=%d", cs.ContainerID, cs.RestartCount)
		}
	}
	return out
}

// checkPodAddressing: each web pod's IP is in its Node's spec.podCIDR, and
// each client pod (ClusterFirst) has the cluster's resolver as the kubelet
// writes it.
func checkPodAddressing(t *testing.T, cp *cluster.ControlPlane, nodes []*clusterNode, web map[string]v1.Pod) {
	t.Helper()
	for _, n := range nodes {
		if p := web[n.name]; !inCIDR(t, p.Status.PodIP, n.cidr) {
			t.Errorf("pod %s on %s has IP %s, not in the Node's podCIDR %s", p.Name, n.name, p.Status.PodIP, n.cidr)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		out, _, err := cp.Kubectl(ctx, "exec", "client-"+n.name, "--", "cat", "/etc/resolv.conf")
		cancel()
		if err != nil {
			t.Errorf("resolv.conf of client-%s: %v", n.name, err)
			continue
		}
		search := "search default.svc." + cluster.ClusterDomain + " svc." + cluster.ClusterDomain + " " + cluster.ClusterDomain
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], search) || lines[1] != "nameserver "+cluster.ClusterDNSIP ||
			lines[2] != "options ndots:5" {
			t.Errorf("resolv.conf of client-%s:\n%s\nwant %q (then the node's searches), nameserver %s, options ndots:5",
				n.name, out, search, cluster.ClusterDNSIP)
		}
	}
}

// checkCadvisor scrapes the node's /metrics/cadvisor and checks that every
// running container of the node's pods carries the series kube-prometheus'
// dashboards plot. It reads the node's port directly: the API server's
// node proxy (Prometheus' usual way in) refuses these nodes' loopback
// InternalIP.
func checkCadvisor(t *testing.T, client kubernetes.Interface, n *clusterNode) {
	t.Helper()
	node := n.name
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	families, err := n.scrapeFamilies("/metrics/cadvisor")
	if err != nil {
		t.Fatalf("%s: %v", node, err)
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				continue
			}
			checked++
			want := map[string]string{"namespace": p.Namespace, "pod": p.Name, "container": cs.Name}
			for _, name := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes"} {
				if _, ok := sampleWith(families[name], want); !ok {
					t.Errorf("%s's /metrics/cadvisor has no %s for %v", node, name, want)
				}
			}
		}
	}
	if checked < 2 {
		t.Errorf("%s: only %d running containers to check", node, checked)
	}
}

// clientSerial is the serial of the client certificate in n's file store.
func clientSerial(t *testing.T, n *netNode) *big.Int {
	t.Helper()
	certs, err := certutil.CertsFromFile(filepath.Join(n.root, "pki", "kubelet-client-current.pem"))
	if err != nil {
		t.Fatalf("%s's client certificate: %v", n.name, err)
	}
	return certs[0].SerialNumber
}

// checkRotationAtRest waits, with the cluster at rest, until every node
// has renewed its short-lived client certificate, and logs the nodes' API
// requests per minute meanwhile. Then each node still heartbeats, the
// Service still answers from it, and no container was restarted.
func checkRotationAtRest(t *testing.T, cp *cluster.ControlPlane, client kubernetes.Interface, joined []*netNode,
	web map[string]v1.Pod, before map[string]string) {
	t.Helper()
	var nodes []*clusterNode
	first := map[string]*big.Int{}
	for _, n := range joined {
		nodes = append(nodes, n.clusterNode)
		first[n.name] = clientSerial(t, n)
	}
	reqs, since := apiRequestsByResource(nodes), time.Now()
	waitFor(t, 5*time.Minute, "every node's client certificate rotated", func() (bool, string) {
		var waiting []string
		for _, n := range joined {
			if clientSerial(t, n).Cmp(first[n.name]) == 0 {
				waiting = append(waiting, n.name)
			}
		}
		return len(waiting) == 0, fmt.Sprintf("not yet: %v", waiting)
	})
	logRequestRate(t, reqs, apiRequestsByResource(nodes), time.Since(since), len(nodes))
	rotated := time.Now()
	for _, n := range joined {
		waitFor(t, time.Minute, n.name+"'s API connections on the new certificate", func() (bool, string) {
			return strings.Contains(n.berthLog(), "client certificate rotated"), "no such log line yet"
		})
		waitFor(t, time.Minute, "a Lease renewal of "+n.name+" after the rotation", func() (bool, string) {
			l, err := client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), n.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return l.Spec.RenewTime.After(rotated), "renewed at " + l.Spec.RenewTime.String()
		})
		waitNodeReady(t, client, n.name, true, time.Minute)
		page, err := wgetFrom(t, cp, "client-"+n.name, "http://web.default.svc.cluster.local")
		if err != nil || !slices.Contains(webNames(web), page) {
			t.Errorf("after the rotation, the Service from %s = %q, %v", n.name, page, err)
		}
	}
	if after := allContainerIDs(t, client); !maps.Equal(after, before) {
		t.Errorf("containers changed across the rotation:\nbefore %v\nafter  %v", before, after)
	}
}

// logRequestRate logs the nodes' API requests per node and minute between
// two readings of apiRequestsByResource, in all and by resource.
func logRequestRate(t *testing.T, from, to map[string]float64, over time.Duration, nodes int) {
	var total float64
	var by []string
	for k, v := range to {
		d := v - from[k]
		total += d
		if d > 0 {
			by = append(by, fmt.Sprintf("%s %.1f", k, d/float64(nodes)/over.Minutes()))
		}
	}
	slices.Sort(by)
	t.Logf("API requests per node per minute, at rest with a certificate rotation, over %s: %.1f (%s)",
		over.Round(time.Second), total/float64(nodes)/over.Minutes(), strings.Join(by, ", "))
}
