package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/berth-dev/berth/test/cluster"
)

// bootstrapSigningDuration is the lifetime of the certificates the test's
// controller-manager signs. It backdates them by 5 minutes, so a client
// certificate's rotation deadline (70-90% of its whole life) falls 36s to
// 132s after it is issued.
const bootstrapSigningDuration = 3 * time.Minute

// startBootstrapControlPlane starts a control plane whose certificates are
// short-lived.
func startBootstrapControlPlane(t *testing.T) (*cluster.ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp, client, _ := startControlPlaneWith(t, cluster.Options{
		NodeMonitorGracePeriod: 20 * time.Second, ClusterSigningDuration: bootstrapSigningDuration})
	return cp, client
}

// bootstrapNode is a berth that joins with a bootstrap kubeconfig only.
type bootstrapNode struct {
	*node
	name, bootstrap, kubeconfig string
	apiPort                     int
	started                     time.Time
}

// startBootstrapNode starts berth with nothing but a bootstrap kubeconfig
// (of a token in group) and the kubeconfig path it is to write; extra
// flags follow. Its pod CIDR is 10.221.<cidr>.0/24.
func startBootstrapNode(t *testing.T, cp *cluster.ControlPlane, name, group string, cidr int, extra ...string) *bootstrapNode {
	t.Helper()
	bootstrap, err := cp.BootstrapKubeconfig(t.Context(), name, group)
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapNode{name: name, bootstrap: bootstrap, apiPort: freePort(t),
		kubeconfig: filepath.Join(t.TempDir(), "kubelet.conf")}
	args := append([]string{
		"--node-name", name,
		"--bootstrap-kubeconfig", bootstrap,
		"--kubeconfig", b.kubeconfig,
		"--node-ip", "127.0.0.1",
		"--port", fmt.Sprint(b.apiPort),
		"--client-ca-file", cp.KubeletClientCA(),
		"--node-status-update-frequency", "2s",
		"--pod-cidr", fmt.Sprintf("10.221.%d.0/24", cidr),
	}, extra...)
	b.started = time.Now()
	b.node = startNode(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth %s log:\n%s", name, b.logTail())
		}
	})
	return b
}

// clientSerial is the serial of the client certificate berth keeps in its
// file store.
func (b *bootstrapNode) clientSerial(t *testing.T) *big.Int {
	t.Helper()
	certs, err := certutil.CertsFromFile(filepath.Join(b.root, "pki", "kubelet-client-current.pem"))
	if err != nil {
		t.Fatalf("client certificate: %v", err)
	}
	return certs[0].SerialNumber
}

// tokenUser is the user of the node's bootstrap token.
func (b *bootstrapNode) tokenUser(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(b.bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := strings.Cut(cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token, ".")
	return "system:bootstrap:" + id
}

// servingCert is the certificate the secure API presents, verified against
// roots for IP 127.0.0.1.
func (b *bootstrapNode) servingCert(roots *x509.CertPool) (*x509.Certificate, error) {
	d := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", b.apiPort))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

func pendingCSRs(t *testing.T, client kubernetes.Interface, signer, user string) []string {
	t.Helper()
	list, err := client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list.Items {
		if c.Spec.SignerName == signer && c.Spec.Username == user && len(c.Status.Conditions) == 0 {
			names = append(names, c.Name)
		}
	}
	return names
}

// TestBootstrap joins berth nodes to a control plane with a bootstrap token
// only, as `kubeadm join` gives a kubelet. Node a's client CSR is approved
// by the controller-manager; it turns Ready and runs a pod; its serving
// certificate comes from a kubelet-serving CSR the test approves, and until
// then its secure port presents none; its client certificate, short-lived,
// is rotated during the test without disturbing the pod or the Node. Node
// b's token is in a group nothing approves: the test denies its first CSR,
// which berth reports in its log and node events and then requests again.
func TestBootstrap(t *testing.T) {
	cp, client := startBootstrapControlPlane(t)
	config := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nserverTLSBootstrap: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startBootstrapNode(t, cp, "boot-a", cluster.AutoApprovedBootstrapGroup, 31, "--rotate-certificates", "--config", config)
	b := startBootstrapNode(t, cp, "boot-b", cluster.ManualBootstrapGroup, 32)

	waitNodeReady(t, client, a.name, true, 3*time.Minute)
	t.Logf("node %s: from `berth run --bootstrap-kubeconfig` to Node Ready: %s", a.name, time.Since(a.started).Round(time.Millisecond))
	firstSerial := a.clientSerial(t)
	checkBootstrapKubeconfig(t, a)

	checkServingBootstrap(t, cp, client, a)
	pod := runPinnedPod(t, client, a.name)

	checkDeniedCSR(t, client, b)

	// The client certificate is renewed before it expires, with the
	// node's own identity; the Node stays Ready and the pod untouched.
	waitFor(t, 4*time.Minute, "the client certificate rotated", func() (bool, string) {
		s := a.clientSerial(t)
		return s.Cmp(firstSerial) != 0, "serial " + s.String()
	})
	waitFor(t, time.Minute, "berth to move its API connections onto the new certificate", func() (bool, string) {
		return strings.Contains(a.berthLog(), "client certificate rotated"), "no such log line yet"
	})
	renewedBy := map[string]bool{}
	list, err := client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if c.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
			renewedBy[c.Spec.Username] = true
		}
	}
	if !renewedBy["system:node:"+a.name] {
		t.Errorf("no client CSR from system:node:%s: the renewal did not use the node's own certificate (CSRs by %v)", a.name, renewedBy)
	}
	// A heartbeat after the rotation proves the API client uses the new
	// certificate (the old connections were closed).
	rotatedAt := time.Now()
	waitFor(t, time.Minute, "a Lease renewal after the rotation", func() (bool, string) {
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), a.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(rotatedAt), "renewed at " + l.Spec.RenewTime.String()
	})
	n, err := client.CoreV1().Nodes().Get(context.Background(), a.name, metav1.GetOptions{})
	if err != nil || !nodeReady(n) {
		t.Errorf("node %s after the rotation: ready %v, err %v", a.name, n != nil && nodeReady(n), err)
	}
	checkPodUndisturbed(t, client, pod)

	// Restarted, berth uses the kubeconfig it wrote (its certificate is
	// good): no second bootstrap, and the pod is adopted untouched.
	a.stop()
	a.start()
	restartedAt := time.Now()
	waitFor(t, time.Minute, "a Lease renewal after the restart", func() (bool, string) {
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), a.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(restartedAt), "renewed at " + l.Spec.RenewTime.String()
	})
	if n := strings.Count(a.berthLog(), "bootstrapping the client certificate"); n != 1 {
		t.Errorf("berth bootstrapped %d times; want once, the restart using the kubeconfig it wrote", n)
	}
	waitNodeReady(t, client, a.name, true, time.Minute)
	checkPodUndisturbed(t, client, pod)
}

// checkBootstrapKubeconfig: the kubeconfig berth wrote points at its file
// store and holds no token.
func checkBootstrapKubeconfig(t *testing.T, a *bootstrapNode) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(a.kubeconfig)
	if err != nil {
		t.Fatalf("the kubeconfig berth wrote: %v", err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	want := filepath.Join(a.root, "pki", "kubelet-client-current.pem")
	if user.Token != "" || user.ClientCertificate != want || user.ClientKey != want {
		t.Errorf("kubeconfig %s: user %+v, want certificate and key %s and no token", a.kubeconfig, user, want)
	}
}

// checkServingBootstrap: a's kubelet-serving CSR waits for approval with
// no certificate served; once approved, the secure port presents one the
// cluster's CA signed, for the node's address. Renewals of it are approved
// for the rest of the test.
func checkServingBootstrap(t *testing.T, cp *cluster.ControlPlane, client kubernetes.Interface, a *bootstrapNode) {
	t.Helper()
	user := "system:node:" + a.name
	waitFor(t, time.Minute, "a kubelet-serving CSR from "+user, func() (bool, string) {
		return len(pendingCSRs(t, client, certificatesv1.KubeletServingSignerName, user)) > 0, "none pending"
	})
	roots, err := certutil.NewPool(cp.KubeletClientCA())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := a.servingCert(x509.NewCertPool()); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Errorf("before its CSR is approved, the secure port presented %v (err %v); want a failed handshake", c, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = cp.ApproveServingCSRs(ctx, a.name)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	})
	var cert *x509.Certificate
	waitFor(t, time.Minute, "the secure port to present a certificate the cluster CA signed", func() (bool, string) {
		c, err := a.servingCert(roots)
		if err != nil {
			return false, err.Error()
		}
		cert = c
		return true, ""
	})
	if cert.Subject.CommonName != user {
		t.Errorf("serving certificate subject %v, want CN %s", cert.Subject, user)
	}
}

// runPinnedPod runs a pod on node and returns it once Running.
func runPinnedPod(t *testing.T, client kubernetes.Interface, node string) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: node,
			Containers: []v1.Container{{
				Name: "app", Image: busybox, ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", "while true; do sleep 1; done"},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var running *v1.Pod
	waitFor(t, 2*time.Minute, "pod steady running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "steady", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		running = p
		return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID != "",
			string(p.Status.Phase)
	})
	return running
}

func checkPodUndisturbed(t *testing.T, client kubernetes.Interface, before *v1.Pod) {
	t.Helper()
	p, err := client.CoreV1().Pods("default").Get(context.Background(), before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	was, now := before.Status.ContainerStatuses[0], p.Status.ContainerStatuses[0]
	if p.UID != before.UID || now.ContainerID != was.ContainerID || now.RestartCount != 0 || p.Status.Phase != v1.PodRunning {
		t.Errorf("pod after the rotation: uid %s container %s restarts %d phase %s; before: uid %s container %s",
			p.UID, now.ContainerID, now.RestartCount, p.Status.Phase, before.UID, was.ContainerID)
	}
}

// checkDeniedCSR: b's first client CSR is denied; berth logs it and
// records a node event, requests again, and joins once that is approved.
func checkDeniedCSR(t *testing.T, client kubernetes.Interface, b *bootstrapNode) {
	t.Helper()
	user := b.tokenUser(t)
	signer := certificatesv1.KubeAPIServerClientKubeletSignerName
	var denied []string
	waitFor(t, time.Minute, "a client CSR from "+user, func() (bool, string) {
		names, err := cluster.SetCSRsApproval(context.Background(), client, signer, user, false)
		if err != nil {
			return false, err.Error()
		}
		denied = append(denied, names...)
		return len(denied) > 0, "none pending"
	})
	waitFor(t, time.Minute, "berth's log and node event about the denied CSR", func() (bool, string) {
		logged := strings.Contains(b.berthLog(), "signing request was denied")
		evented := false
		for _, e := range b.nodeEvents() {
			evented = evented || (e.Reason == "CertificateSigningRequestDenied" && e.Type == v1.EventTypeWarning)
		}
		return logged && evented, fmt.Sprintf("logged %v, event %v", logged, evented)
	})
	var approved []string
	waitFor(t, 2*time.Minute, "a new client CSR from "+user+" after the denial", func() (bool, string) {
		names, err := cluster.SetCSRsApproval(context.Background(), client, signer, user, true)
		if err != nil {
			return false, err.Error()
		}
		approved = append(approved, names...)
		return len(approved) > 0, "none pending"
	})
	if approved[0] == denied[0] {
		t.Errorf("the CSR approved (%s) is the one denied", approved[0])
	}
	waitNodeReady(t, client, b.name, true, 2*time.Minute)
	// The event waited for the node's credentials, then reached the API
	// server.
	waitFor(t, time.Minute, "the denied CSR's event in the API server", func() (bool, string) {
		list, err := client.CoreV1().Events(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + b.name + ",reason=CertificateSigningRequestDenied"})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) > 0, "none"
	})
	if _, err := os.Stat(filepath.Join(b.root, "pki", "kubelet-client-current.pem")); err != nil {
		t.Errorf("node %s: no client certificate after approval: %v", b.name, err)
	}
}

// TestBootstrapInvalidKubeconfig: a bootstrap kubeconfig that is missing or
// lacks a field stops berth at start-up with an error naming the file and
// the field, and nothing is written in place of the kubeconfig.
func TestBootstrapInvalidKubeconfig(t *testing.T) {
	dir := t.TempDir()
	noToken := filepath.Join(dir, "no-token.conf")
	if err := os.WriteFile(noToken, []byte(`apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: Zm9v}
users:
- name: tls-bootstrap-token-user
  user: {}
contexts:
- name: bootstrap
  context: {cluster: kubernetes, user: tls-bootstrap-token-user}
current-context: bootstrap
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.conf"), "bootstrap kubeconfig " + filepath.Join(dir, "missing.conf")},
		{noToken, "bootstrap kubeconfig " + noToken + ": users[tls-bootstrap-token-user].token: not set"},
	} {
		root := t.TempDir()
		kubeconfig := filepath.Join(root, "kubelet.conf")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "run",
			"--root-dir", root, "--node-name", "boot-invalid",
			"--read-only-port", "0", "--port", "0",
			"--pod-cidr", "10.221.40.0/24", "--cni-bridge", "be2ebad0",
			"--bootstrap-kubeconfig", tc.path, "--kubeconfig", kubeconfig).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("berth with bootstrap kubeconfig %s: err %v, output:\n%s\nwant it to name %q", tc.path, err, out, tc.want)
		}
		if _, err := os.Stat(kubeconfig); err == nil {
			t.Errorf("a kubeconfig was written from the invalid %s", tc.path)
		}
	}
}
