package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/test/cluster"
)

// waitNodePodCIDR waits for the controller-manager to give name a
// podCIDR, then for berth's bridge conflist to take it.
func waitNodePodCIDR(t *testing.T, client kubernetes.Interface, n *clusterNode) string {
	t.Helper()
	var cidr string
	waitFor(t, 60*time.Second, "the Node's spec.podCIDR", func() (bool, string) {
		node, err := client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cidr = node.Spec.PodCIDR
		return cidr != "", "none yet"
	})
	waitFor(t, 60*time.Second, "berth's conflist on the Node's podCIDR", func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(n.root, "cni", "net.d", network.ConfListName))
		return err == nil && strings.Contains(string(data), `"`+cidr+`"`), fmt.Sprintf("%s (%v)", data, err)
	})
	return cidr
}

// createPodOn creates a pod bound to node (no scheduler) and waits until
// it runs.
func createPodOn(t *testing.T, client kubernetes.Interface, node, name string, command []string) *v1.Pod {
	t.Helper()
	no := false
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: node, AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []v1.Container{{Name: "main", Image: busybox, Command: command}},
		},
	}
	waitFor(t, 60*time.Second, "pod "+name+" created", func() (bool, string) {
		_, err := client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err) // the default service account may not exist yet
	})
	var got *v1.Pod
	waitFor(t, 120*time.Second, "pod "+name+" running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = p
		return p.Status.Phase == v1.PodRunning && p.Status.PodIP != "", fmt.Sprintf("%s %s", p.Status.Phase, p.Status.PodIP)
	})
	return got
}

// In cluster mode, the bridge's range is the Node's spec.podCIDR, which
// kube-controller-manager allocates (--allocate-node-cidrs), not
// --pod-cidr (the harness gives each node one, as an operator might: the
// Node's wins, as for the kubelet). Two nodes get two ranges, and a pod on
// one reaches a pod on the other by its IP, un-NATed.
func TestClusterPodCIDRFromNode(t *testing.T) {
	cp, client, _ := startControlPlaneWith(t, cluster.Options{
		NodeMonitorGracePeriod: 20 * time.Second,
		ControllerManagerArgs: []string{"--allocate-node-cidrs=true", "--cluster-cidr=" + podnetClusterCIDR,
			"--node-cidr-mask-size=24"},
	})
	tag := fmt.Sprintf("%04x", rand.IntN(0xffff))
	given1, given2 := podnetCIDR(), podnetCIDR()
	n1 := startClusterNode(t, cp, "podnet-1-"+tag, "--cluster-cidr", podnetClusterCIDR, "--pod-cidr", given1)
	cleanupPodnet(t, n1.bridge, given1)
	n2 := startClusterNode(t, cp, "podnet-2-"+tag, "--cluster-cidr", podnetClusterCIDR, "--pod-cidr", given2)
	cleanupPodnet(t, n2.bridge, given2)
	cidr1, cidr2 := waitNodePodCIDR(t, client, n1), waitNodePodCIDR(t, client, n2)
	cleanupPodnet(t, n1.bridge, cidr1)
	cleanupPodnet(t, n2.bridge, cidr2)
	if cidr1 == cidr2 {
		t.Fatalf("both nodes have podCIDR %s", cidr1)
	}
	waitNodeReady(t, client, n1.name, true, 90*time.Second)
	waitNodeReady(t, client, n2.name, true, 90*time.Second)

	server := createPodOn(t, client, n1.name, "server", []string{"sh", "-c",
		"mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && exec httpd -f -p 80 -h /www"})
	client2 := createPodOn(t, client, n2.name, "client", []string{"sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"})
	if !inCIDR(t, server.Status.PodIP, cidr1) || !inCIDR(t, client2.Status.PodIP, cidr2) {
		t.Fatalf("pod IPs not from the Nodes' podCIDRs: server %s (node %s), client %s (node %s)",
			server.Status.PodIP, cidr1, client2.Status.PodIP, cidr2)
	}
	var seen string
	waitFor(t, 30*time.Second, "the client's wget to the server's pod IP", func() (bool, string) {
		id := containerID(t, client2, "main")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		out, errOut, code, err := n2.cri.ExecSync(ctx, id,
			[]string{"wget", "-O", "-", "http://" + server.Status.PodIP + "/cgi-bin/ip"}, 10*time.Second)
		seen = strings.TrimPrefix(strings.Trim(strings.TrimSpace(string(out)), "[]"), "::ffff:")
		return err == nil && code == 0 && seen != "", fmt.Sprintf("code %d, err %v, stderr %s", code, err, errOut)
	})
	if seen != client2.Status.PodIP {
		t.Fatalf("the server saw %s, not the client pod %s: pod-to-pod traffic was NATed", seen, client2.Status.PodIP)
	}
}
