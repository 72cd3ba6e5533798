package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pkiFiles are the credentials Start writes under dir/pki.
type pkiFiles struct {
	apiserver     keyPair // serving
	kubeletClient keyPair // the apiserver's client certificate for nodes
	frontProxyCA  *authority
	frontProxy    keyPair // the apiserver's client certificate for aggregated APIs
	admin         keyPair
	kcm           keyPair
	scheduler     keyPair
	saKey, saPub  string // service account token signing key pair
	tokens        string // --token-auth-file
}

// writePKI makes the CAs and everything they sign, as kubeadm would.
func (c *ControlPlane) writePKI() (pkiFiles, error) {
	dir := filepath.Join(c.dir, "pki")
	var f pkiFiles
	var err error
	if c.ca, err = newAuthority(dir, "ca", "berth-test-ca"); err != nil {
		return f, err
	}
	if c.clientCA, err = newAuthority(dir, "client-ca", "berth-test-client-ca"); err != nil {
		return f, err
	}
	f.apiserver, err = c.ca.issue(dir, "apiserver", certSpec{
		commonName: "kube-apiserver",
		dnsNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(kubernetesSvcIP)},
		server:     true,
	})
	if err != nil {
		return f, err
	}
	clients := []struct {
		pair     *keyPair
		name, cn string
		orgs     []string
	}{
		{&f.kubeletClient, "apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
		{&f.admin, "admin", "kubernetes-admin", []string{"system:masters"}},
		{&f.kcm, "controller-manager", "system:kube-controller-manager", nil},
		{&f.scheduler, "scheduler", "system:kube-scheduler", nil},
	}
	for _, cl := range clients {
		if *cl.pair, err = c.clientCA.issue(dir, cl.name, certSpec{commonName: cl.cn, orgs: cl.orgs}); err != nil {
			return f, err
		}
	}
	// The request-header (front proxy) CA: without it the controller-manager
	// and scheduler, which authenticate their own callers through the
	// apiserver's extension-apiserver-authentication ConfigMap, log an error
	// about its missing bundle every few seconds.
	if f.frontProxyCA, err = newAuthority(dir, "front-proxy-ca", "berth-test-front-proxy-ca"); err != nil {
		return f, err
	}
	if f.frontProxy, err = f.frontProxyCA.issue(dir, "front-proxy-client", certSpec{commonName: "front-proxy-client"}); err != nil {
		return f, err
	}
	f.saKey, f.saPub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := writeServiceAccountKey(f.saKey, f.saPub); err != nil {
		return f, err
	}
	// token,user,uid,groups: a static admin for tests that want a bearer token.
	f.tokens = filepath.Join(dir, "tokens.csv")
	line := fmt.Sprintf("%s,berth-test-admin,berth-test-admin,system:masters\n", c.adminToken)
	return f, os.WriteFile(f.tokens, []byte(line), 0o600)
}

// startEtcd starts a single-member etcd and returns its client URL once it
// reports itself healthy.
func (c *ControlPlane) startEtcd(ctx context.Context) (string, error) {
	clientURL, err := loopbackURL("http")
	if err != nil {
		return "", err
	}
	peerURL, err := loopbackURL("http")
	if err != nil {
		return "", err
	}
	p, err := c.run("etcd", c.bins.Etcd,
		"--name=berth-test",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=berth-test="+peerURL,
		"--unsafe-no-fsync", // a test cluster's data need not survive a power cut
	)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	err = c.waitUntil(ctx, 30*time.Second, p, "etcd", func(ctx context.Context) error {
		body, err := get(ctx, client, clientURL+"/health", "")
		if err == nil && !strings.Contains(body, `"health":"true"`) {
			err = fmt.Errorf("unhealthy: %s", body)
		}
		return err
	})
	return clientURL, err
}

// apiServerName is kube-apiserver's name in procs and its log's.
const apiServerName = "kube-apiserver"

// startAPIServer starts kube-apiserver and waits until /readyz says yes.
// Its command line is kept for StartAPIServer.
func (c *ControlPlane) startAPIServer(ctx context.Context, etcd string, f pkiFiles) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.server = "https://127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--etcd-servers=" + etcd,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.dir, "certs", "kube-apiserver"), // never /var/run/kubernetes
		"--tls-cert-file=" + f.apiserver.certFile,
		"--tls-private-key-file=" + f.apiserver.keyFile,
		"--client-ca-file=" + c.clientCA.certFile,
		"--token-auth-file=" + f.tokens,
		"--authorization-mode=Node,RBAC",
		// Nodes join with bootstrap tokens (BootstrapKubeconfig), as
		// kubeadm's apiserver lets them.
		"--enable-bootstrap-token-auth",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--service-account-issuer=" + saIssuer,
		"--service-account-key-file=" + f.saPub,
		"--service-account-signing-key-file=" + f.saKey,
		"--api-audiences=" + saIssuer,
		// No kubernetes Service endpoints: nothing in a test cluster can
		// route to 127.0.0.1 of the apiserver's host from a pod anyway.
		"--endpoint-reconciler-type=none",
		"--kubelet-client-certificate=" + f.kubeletClient.certFile,
		"--kubelet-client-key=" + f.kubeletClient.keyFile,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--requestheader-client-ca-file=" + f.frontProxyCA.certFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f.frontProxy.certFile,
		"--proxy-client-key-file=" + f.frontProxy.keyFile,
	}
	if c.opts.KubeletCertificateAuthority != "" {
		args = append(args, "--kubelet-certificate-authority="+c.opts.KubeletCertificateAuthority)
	}
	c.apiArgs = append(args, c.opts.APIServerArgs...)
	p, err := c.run(apiServerName, c.bins.APIServer, c.apiArgs...)
	if err != nil {
		return err
	}
	return c.waitReadyz(ctx, p)
}

// waitReadyz waits until the apiserver run p answers 200 on /readyz.
func (c *ControlPlane) waitReadyz(ctx context.Context, p *process) error {
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.cert)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	defer client.CloseIdleConnections()
	return c.waitUntil(ctx, 2*time.Minute, p, apiServerName, func(ctx context.Context) error {
		_, err := get(ctx, client, c.server+"/readyz", c.adminToken)
		return err
	})
}

// startControllerManager starts kube-controller-manager with every default
// controller, node lifecycle's tuned for tests, and waits until it is
// healthy.
func (c *ControlPlane) startControllerManager(ctx context.Context, kubeconfig string, f pkiFiles) (*process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append(c.componentArgs("kube-controller-manager", kubeconfig, port),
		"--controllers=*",
		"--use-service-account-credentials",
		"--service-account-private-key-file="+f.saKey,
		"--root-ca-file="+c.ca.certFile, // published as kube-root-ca.crt
		// CSRs (a node's client certificate, say) are signed by the CA the
		// apiserver trusts for clients.
		"--cluster-signing-cert-file="+c.clientCA.certFile,
		"--cluster-signing-key-file="+c.clientCA.keyFile,
		"--service-cluster-ip-range="+serviceCIDR,
		"--allocate-node-cidrs=false",
		"--node-monitor-period=2s",
		"--node-monitor-grace-period="+c.opts.NodeMonitorGracePeriod.String(),
	)
	if c.opts.ClusterSigningDuration > 0 {
		args = append(args, "--cluster-signing-duration="+c.opts.ClusterSigningDuration.String())
	}
	p, err := c.run("kube-controller-manager", c.bins.ControllerManager, append(args, c.opts.ControllerManagerArgs...)...)
	if err != nil {
		return nil, err
	}
	return p, c.waitHealthz(ctx, p, port)
}

// componentArgs are the flags the controller-manager and the scheduler
// share: their kubeconfig for everything, a loopback secure port of their
// own (for the health check), no leader election.
func (c *ControlPlane) componentArgs(name, kubeconfig string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.dir, "certs", name),
		"--leader-elect=false",
	}
}

// startScheduler starts kube-scheduler and waits until it is healthy.
func (c *ControlPlane) startScheduler(ctx context.Context, kubeconfig string) (*process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := c.componentArgs("kube-scheduler", kubeconfig, port)
	p, err := c.run("kube-scheduler", c.bins.Scheduler, append(args, c.opts.SchedulerArgs...)...)
	if err != nil {
		return nil, err
	}
	return p, c.waitHealthz(ctx, p, port)
}

// waitHealthz waits for a component's /healthz on its secure port. The
// component serves it with a certificate it made up itself, and /healthz
// needs no credentials.
func (c *ControlPlane) waitHealthz(ctx context.Context, p *process, port int) error {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	return c.waitUntil(ctx, time.Minute, p, p.Name, func(ctx context.Context) error {
		_, err := get(ctx, client, url, "")
		return err
	})
}

// get fetches url and fails unless it answers 200.
func get(ctx context.Context, client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the component binds it; that start then fails loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("free port: not a TCP address")
	}
	return addr.Port, nil
}

func loopbackURL(scheme string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, port), nil
}
