package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-dev/berth/test/cluster"
)

func TestControlPlane(t *testing.T) {
	ctx := testContext(t)
	bins, err := cluster.Build(ctx, logWriter{t})
	if err != nil {
		t.Fatalf("build the control-plane binaries: %v", err)
	}
	dir := t.TempDir() // registered first, so removed after Stop
	started := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cp, err := cluster.Start(startCtx, bins, dir, cluster.Options{})
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", cp.LogTails(40))
		}
	})
	t.Logf("control plane up in %v at %s", time.Since(started).Round(100*time.Millisecond), cp.Server())

	t.Run("readyz", func(t *testing.T) { checkReadyz(ctx, t, cp) })
	t.Run("kubectl", func(t *testing.T) {
		out, _, err := cp.Kubectl(ctx, "get", "namespaces", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{"namespace/default", "namespace/kube-system"} {
			if !strings.Contains(out, ns) {
				t.Errorf("kubectl get namespaces lacks %s:\n%s", ns, out)
			}
		}
	})
	admin, err := cp.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("default ServiceAccount", func(t *testing.T) {
		eventually(ctx, t, time.Minute, func(ctx context.Context) error {
			_, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err
		})
	})
	t.Run("kube-root-ca.crt", func(t *testing.T) {
		want, err := os.ReadFile(cp.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, time.Minute, func(ctx context.Context) error {
			cm, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if err == nil && cm.Data["ca.crt"] != string(want) {
				err = errors.New("its ca.crt is not the CA of CAFile")
			}
			return err
		})
	})
	t.Run("node credentials", func(t *testing.T) { checkNodeCredentials(ctx, t, cp) })
	t.Run("apiserver restart", func(t *testing.T) { checkAPIServerRestart(ctx, t, cp) })
	t.Run("kubelet client CA", func(t *testing.T) {
		data, err := os.ReadFile(cp.KubeletClientCA())
		if err != nil {
			t.Fatal(err)
		}
		if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(data) {
			t.Errorf("%s holds no certificate", cp.KubeletClientCA())
		}
	})

	// Stop must also cope with an apiserver that is already gone (and not
	// signal its reaped pid again); the loop below checks it stopped the rest.
	if err := cp.StopAPIServer(); err != nil {
		t.Errorf("StopAPIServer before Stop: %v", err)
	}
	stopping := time.Now()
	cp.Stop()
	t.Logf("control plane stopped in %v", time.Since(stopping).Round(100*time.Millisecond))
	for _, p := range cp.Processes() {
		if p.Pid <= 1 {
			t.Errorf("%s has pid %d", p.Name, p.Pid)
			continue
		}
		// Signal 0 to the group: ESRCH once no member is left.
		if err := syscall.Kill(-p.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s's process group %d is still there after Stop (kill 0: %v)", p.Name, p.Pid, err)
		}
	}
}

// checkReadyz asks the apiserver itself, verifying it with CAFile and
// authenticating with the admin token.
func checkReadyz(ctx context.Context, t *testing.T, cp *cluster.ControlPlane) {
	ca, err := os.ReadFile(cp.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s holds no certificate", cp.CAFile())
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/readyz", "/version"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.Server()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+cp.AdminToken())
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
		}
		t.Logf("GET %s: %s", path, strings.Join(strings.Fields(string(body)), " "))
	}
}

// checkAPIServerRestart takes the apiserver away and brings it back: while
// it is gone its port refuses connections and the other programs run on;
// once back, it serves the Node that checkNodeCredentials created, which
// etcd kept.
func checkAPIServerRestart(ctx context.Context, t *testing.T, cp *cluster.ControlPlane) {
	before := processNamed(t, cp, "kube-apiserver")
	stopping := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped in %v", time.Since(stopping).Round(100*time.Millisecond))
	if err := cp.StopAPIServer(); err != nil {
		t.Errorf("StopAPIServer again: %v", err)
	}

	// A client of its own: a pooled connection would fail differently.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.Server()+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET /readyz with the apiserver stopped: want connection refused, got %v", err)
	}
	for _, p := range cp.Processes() {
		if p.Name == "kube-apiserver" || p.Pid <= 1 {
			continue
		}
		if err := syscall.Kill(p.Pid, 0); err != nil {
			t.Errorf("%s (pid %d) is gone with the apiserver: %v", p.Name, p.Pid, err)
		}
	}

	starting := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := cp.StartAPIServer(startCtx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver ready again in %v", time.Since(starting).Round(100*time.Millisecond))
	if after := processNamed(t, cp, "kube-apiserver"); after.Pid == before.Pid {
		t.Errorf("kube-apiserver has its old pid %d after a restart", after.Pid)
	}
	if err := cp.StartAPIServer(startCtx); err == nil {
		t.Error("StartAPIServer with the apiserver running: want an error")
	}
	out, _, err := cp.Kubectl(ctx, "get", "nodes", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "node/n1") {
		t.Errorf("kubectl get nodes after the restart lacks node/n1:\n%s", out)
	}
}

// processNamed is cp's latest run of the program called name.
func processNamed(t *testing.T, cp *cluster.ControlPlane, name string) cluster.Process {
	t.Helper()
	for _, p := range cp.Processes() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no process %s", name)
	return cluster.Process{}
}

// checkNodeCredentials checks that a node's kubeconfig makes it that node
// to the Node authorizer and NodeRestriction: it may register itself, not
// another node, and may not read the cluster's secrets.
func checkNodeCredentials(ctx context.Context, t *testing.T, cp *cluster.ControlPlane) {
	path, err := cp.NodeKubeconfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	node, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node n1 cannot register itself: %v", err)
	}
	_, err = node.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node n1 creating node n2: want Forbidden, got %v", err)
	}
	_, err = node.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node n1 listing all secrets: want Forbidden, got %v", err)
	}
}

// eventually retries check every half second until it succeeds or timeout
// passes.
func eventually(ctx context.Context, t *testing.T, timeout time.Duration, check func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not within %v: %v", timeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// testContext ends a little before the test binary's -timeout, so that a
// slow first build fails with its output rather than a panic.
func testContext(t *testing.T) context.Context {
	deadline, ok := t.Deadline()
	if !ok {
		return t.Context()
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(-30*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// logWriter sends the build's progress to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
