package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func TestCertsUsable(t *testing.T) {
	cert := func(from, to time.Time) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: "system:node:a"}, NotBefore: from, NotAfter: to}
	}
	tests := []struct {
		name  string
		certs []*x509.Certificate
		ok    bool
		why   string
	}{
		{"none", nil, false, "no client certificate"},
		{"valid", []*x509.Certificate{cert(t0.Add(-time.Hour), t0.Add(time.Hour))}, true, ""},
		{"expired", []*x509.Certificate{cert(t0.Add(-2*time.Hour), t0.Add(-time.Hour))}, false, "expired at 2026-11-27T11:00:00Z"},
		{"one of the chain expired", []*x509.Certificate{cert(t0.Add(-time.Hour), t0.Add(time.Hour)), cert(t0.Add(-2*time.Hour), t0.Add(-time.Second))}, false, "expired"},
		{"not yet valid", []*x509.Certificate{cert(t0.Add(time.Hour), t0.Add(2*time.Hour))}, false, "not valid before"},
	}
	for _, tc := range tests {
		ok, why := certsUsable(tc.certs, t0)
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s: certsUsable = %v, %q; want %v, containing %q", tc.name, ok, why, tc.ok, tc.why)
		}
	}
}

func bootstrapConfig() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
	cfg.AuthInfos["tls-bootstrap-token-user"] = &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"}
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "tls-bootstrap-token-user"}
	cfg.CurrentContext = "ctx"
	return cfg
}

func TestCheckBootstrap(t *testing.T) {
	tests := []struct {
		name   string
		change func(*clientcmdapi.Config)
		want   string // "" for valid
	}{
		{"valid", func(*clientcmdapi.Config) {}, ""},
		{"no current context", func(c *clientcmdapi.Config) { c.CurrentContext = "" }, "current-context: not set"},
		{"unknown context", func(c *clientcmdapi.Config) { c.CurrentContext = "x" }, `current-context: names context "x"`},
		{"unknown cluster", func(c *clientcmdapi.Config) { c.Contexts["ctx"].Cluster = "y" }, `contexts[ctx].cluster: names cluster "y"`},
		{"no server", func(c *clientcmdapi.Config) { c.Clusters["c"].Server = "" }, "clusters[c].server: not set"},
		{"no CA", func(c *clientcmdapi.Config) { c.Clusters["c"].CertificateAuthorityData = nil }, "clusters[c].certificate-authority-data: not set"},
		{"CA file", func(c *clientcmdapi.Config) {
			c.Clusters["c"].CertificateAuthorityData = nil
			c.Clusters["c"].CertificateAuthority = "/ca.crt"
		}, ""},
		{"unknown user", func(c *clientcmdapi.Config) { c.Contexts["ctx"].AuthInfo = "z" }, `contexts[ctx].user: names user "z"`},
		{"no token", func(c *clientcmdapi.Config) { c.AuthInfos["tls-bootstrap-token-user"].Token = "" }, "users[tls-bootstrap-token-user].token: not set"},
	}
	for _, tc := range tests {
		cfg := bootstrapConfig()
		tc.change(cfg)
		err := checkBootstrap(cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestLoadBootstrapNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.conf")
	if _, err := loadBootstrap(missing); err == nil || !strings.Contains(err.Error(), "bootstrap kubeconfig "+missing) {
		t.Errorf("missing file: %v", err)
	}
	garbled := filepath.Join(dir, "garbled.conf")
	if err := os.WriteFile(garbled, []byte("{not yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadBootstrap(garbled); err == nil || !strings.Contains(err.Error(), garbled) {
		t.Errorf("garbled file: %v", err)
	}
	noServer := bootstrapConfig()
	noServer.Clusters["c"].Server = ""
	path := filepath.Join(dir, "noserver.conf")
	if err := clientcmd.WriteToFile(*noServer, path); err != nil {
		t.Fatal(err)
	}
	if _, err := loadBootstrap(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "clusters[c].server") {
		t.Errorf("no server: %v", err)
	}
}

// A missing kubeconfig is bootstrapped: the kubeconfig written points at
// the file store and keeps the bootstrap kubeconfig's server and CA, not
// its token.
func TestClientConfigsBootstrapWritesKubeconfig(t *testing.T) {
	dir := t.TempDir()
	boot := filepath.Join(dir, "bootstrap.conf")
	if err := clientcmd.WriteToFile(*bootstrapConfig(), boot); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	pem := filepath.Join(dir, "pki", "kubelet-client-current.pem")
	o := Options{KubeconfigPath: kubeconfig, BootstrapPath: boot, Clock: clocktesting.NewFakeClock(t0), Log: slog.New(slog.DiscardHandler)}
	user, bootstrap, err := clientConfigs(o, pem)
	if err != nil {
		t.Fatal(err)
	}
	if bootstrap == nil || bootstrap.BearerToken != "abcdef.0123456789abcdef" {
		t.Fatalf("bootstrap config %+v, want the token's", bootstrap)
	}
	if user.BearerToken != "" || user.CertFile != pem || user.KeyFile != pem {
		t.Errorf("user config: token %q, cert %q, key %q; want the store's file only", user.BearerToken, user.CertFile, user.KeyFile)
	}
	written, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := written.Contexts[written.CurrentContext]
	if c := written.Clusters[ctx.Cluster]; c.Server != "https://127.0.0.1:6443" || string(c.CertificateAuthorityData) != "ca" {
		t.Errorf("written cluster %+v", c)
	}
	if a := written.AuthInfos[ctx.AuthInfo]; a.Token != "" || a.ClientCertificate != pem || a.ClientKey != pem {
		t.Errorf("written user %+v", a)
	}
}

// An invalid bootstrap kubeconfig stops berth only when it is needed.
func TestClientConfigsInvalidBootstrap(t *testing.T) {
	dir := t.TempDir()
	boot := filepath.Join(dir, "bootstrap.conf")
	cfg := bootstrapConfig()
	cfg.AuthInfos["tls-bootstrap-token-user"].Token = ""
	if err := clientcmd.WriteToFile(*cfg, boot); err != nil {
		t.Fatal(err)
	}
	o := Options{KubeconfigPath: filepath.Join(dir, "kubelet.conf"), BootstrapPath: boot,
		Clock: clocktesting.NewFakeClock(t0), Log: slog.New(slog.DiscardHandler)}
	_, _, err := clientConfigs(o, filepath.Join(dir, "x.pem"))
	if err == nil || !strings.Contains(err.Error(), boot) || !strings.Contains(err.Error(), "users[tls-bootstrap-token-user].token") {
		t.Fatalf("error %v, want one naming %s and the token field", err, boot)
	}
	if _, err := os.Stat(o.KubeconfigPath); err == nil {
		t.Error("a kubeconfig was written from an invalid bootstrap kubeconfig")
	}
}

func TestFailure(t *testing.T) {
	tests := []struct {
		name, msg string
		err       error
		reason    string
		message   string
	}{
		{"denied", "Certificate request was not signed",
			errors.New("certificate signing request is denied, reason: Nope, message: not you"),
			ReasonCSRDenied, "the client certificate's signing request was denied (certificate signing request is denied, reason: Nope, message: not you); requesting again with back-off"},
		{"failed", "Certificate request was not signed",
			errors.New("certificate signing request failed, reason: SignerError, message: x"), ReasonCSRFailed, "signing request failed"},
		{"never approved", "Certificate request was not signed", wait.ErrorInterrupted(nil), ReasonCSRNotApproved, "not approved and issued in time"},
		{"deadline", "Certificate request was not signed", fmt.Errorf("waiting: %w", context.DeadlineExceeded), ReasonCSRNotApproved, "not approved"},
		{"create refused", "Failed while requesting a signed certificate from the control plane",
			errors.New(`cannot create certificate signing request: forbidden`), ReasonRequestFailed, "requesting the client certificate failed: Failed while requesting"},
		{"backoff limit", "Reached backoff limit, still unable to rotate certs", errors.New("timed out waiting for the condition"), "", ""},
		{"stopped", "Certificate request was not signed", context.Canceled, "", ""},
		{"no error", "x", nil, "", ""},
	}
	for _, tc := range tests {
		reason, message, ok := failure("client", tc.msg, tc.err)
		if reason != tc.reason || ok != (tc.reason != "") || !strings.Contains(message, tc.message) {
			t.Errorf("%s: failure = %q, %q, %v; want %q containing %q", tc.name, reason, message, ok, tc.reason, tc.message)
		}
	}
}

// Errors logged through the manager's logger become events; the rest is
// only logged.
func TestReporterLogger(t *testing.T) {
	var got []string
	r := &reporter{kind: "serving", log: slog.New(slog.DiscardHandler)}
	log := r.logger(slog.New(slog.DiscardHandler)).WithName("x").WithValues("k", "v")
	log.Error(errors.New("certificate signing request is denied, reason: R, message: M"), "Certificate request was not signed")
	r.SetRecorderForTest(func(eventType, reason, message string) { got = append(got, eventType+" "+reason) })
	log.Info("Rotating certificates")
	log.Error(errors.New("certificate signing request is denied, reason: R, message: M"), "Certificate request was not signed")
	if want := []string{v1.EventTypeWarning + " " + ReasonCSRDenied}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func (r *reporter) SetRecorderForTest(f func(eventType, reason, message string)) { r.record.Store(&f) }

func TestServingTemplate(t *testing.T) {
	addr := func(typ v1.NodeAddressType, a string) v1.NodeAddress { return v1.NodeAddress{Type: typ, Address: a} }
	tests := []struct {
		name  string
		addrs []v1.NodeAddress
		dns   []string
		ips   []string
	}{
		{"no address", nil, nil, nil},
		{"host name only", []v1.NodeAddress{addr(v1.NodeHostName, "node-a")}, nil, nil},
		{"berth's", []v1.NodeAddress{addr(v1.NodeInternalIP, "10.0.0.5"), addr(v1.NodeHostName, "node-a")}, []string{"node-a"}, []string{"10.0.0.5"}},
		{"every kind, duplicates", []v1.NodeAddress{
			addr(v1.NodeInternalIP, "10.0.0.5"), addr(v1.NodeExternalIP, "192.0.2.1"), addr(v1.NodeHostName, "10.0.0.5"),
			addr(v1.NodeInternalDNS, "b.internal"), addr(v1.NodeExternalDNS, "a.example"), addr(v1.NodeHostName, "a.example"),
			addr(v1.NodeInternalIP, ""), addr(v1.NodeExternalIP, "not-an-ip"),
		}, []string{"a.example", "b.internal"}, []string{"10.0.0.5", "192.0.2.1"}},
	}
	for _, tc := range tests {
		got := servingTemplate("node-a", tc.addrs)
		if tc.ips == nil {
			if got != nil {
				t.Errorf("%s: template %+v, want none", tc.name, got)
			}
			continue
		}
		var ips []string
		for _, ip := range got.IPAddresses {
			ips = append(ips, ip.String())
		}
		if got.Subject.CommonName != "system:node:node-a" || fmt.Sprint(got.Subject.Organization) != "[system:nodes]" ||
			fmt.Sprint(got.DNSNames) != fmt.Sprint(tc.dns) || fmt.Sprint(ips) != fmt.Sprint(tc.ips) {
			t.Errorf("%s: template subject %v, dns %v, ips %v; want dns %v, ips %v", tc.name, got.Subject, got.DNSNames, ips, tc.dns, tc.ips)
		}
	}
}

func TestRotated(t *testing.T) {
	a, b := &tls.Certificate{}, &tls.Certificate{}
	tests := []struct {
		name       string
		last, curr *tls.Certificate
		want       bool
	}{
		{"none yet", nil, nil, false},
		{"first", nil, a, true},
		{"same", a, a, false},
		{"new", a, b, true},
		{"expired (none current)", a, nil, false},
	}
	for _, tc := range tests {
		if got := rotated(tc.last, tc.curr); got != tc.want {
			t.Errorf("%s: rotated = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The rotation's check runs on the injected clock: once the certificate
// changes, the connections made with the old one are closed at the next
// check, and new ones may be made.
func TestRotationRunClosesOldConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	clk := clocktesting.NewFakeClock(t0)
	first := &tls.Certificate{Leaf: &x509.Certificate{NotAfter: t0.Add(time.Hour)}}
	second := &tls.Certificate{Leaf: &x509.Certificate{NotAfter: t0.Add(2 * time.Hour)}}
	var cur atomicCert
	cur.store(first)
	r := &rotation{current: cur.load, log: slog.New(slog.DiscardHandler), dialer: newTestDialer()}
	r.last.Store(first)
	conn, err := r.dialer.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx, clk) }()
	defer func() { cancel(); <-done }()
	waitFor(t, clk.HasWaiters)
	clk.Step(rotationCheckPeriod) // nothing changed: the connection stays
	cur.store(second)
	waitFor(t, clk.HasWaiters)
	clk.Step(rotationCheckPeriod)
	waitFor(t, func() bool { return r.last.Load() == second })
	if _, err := conn.Write([]byte("x")); err == nil {
		t.Error("the connection made with the old certificate is still open")
	}
}
