package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/berth-dev/berth/internal/pki"
)

// TestSecureAPI serves the secure port with berth's self-signed
// certificate: unauthenticated callers get 401, a bearer token from the
// token file or a client certificate from the client CA is served, and the
// fingerprint berth logs is the certificate it serves.
func TestSecureAPI(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("e2e-token,operator,1000,\"ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, caKey := newCA(t)
	caFile := filepath.Join(dir, "ca.crt")
	writePEM(t, caFile, "CERTIFICATE", ca.Raw)
	client := newClientCert(t, ca, caKey, "alice")
	stranger, strangerKey := newCA(t) // a certificate the node's CA did not sign
	strangerCert := tls.Certificate{Certificate: [][]byte{stranger.Raw}, PrivateKey: strangerKey}

	port := freePort(t)
	n := startNode(t, "--port", strconv.Itoa(port), "--token-auth-file", tokenFile, "--client-ca-file", caFile)
	n.writeManifest("web.yaml", sleeper("web", "1"))
	n.waitRunning("web", 60*time.Second)

	certFile := filepath.Join(n.root, "pki", pki.CertFileName)
	served, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatalf("the self-signed certificate: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(served) {
		t.Fatalf("%s holds no certificate", certFile)
	}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	call := func(path, token string, cert *tls.Certificate) (int, []byte, error) {
		cfg := &tls.Config{RootCAs: roots}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}

	for _, tc := range []struct {
		name  string
		token string
		cert  *tls.Certificate
	}{
		{name: "no credentials"},
		{name: "a wrong token", token: "guess"},
	} {
		code, body, err := call("/pods", tc.token, tc.cert)
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s: %d %q %v, want 401", tc.name, code, body, err)
		}
	}
	if _, _, err := call("/pods", "", &strangerCert); err == nil {
		t.Error("a client certificate from another CA was accepted")
	}
	for _, tc := range []struct {
		name  string
		token string
		cert  *tls.Certificate
	}{
		{name: "the token", token: "e2e-token"},
		{name: "a client certificate", cert: &client},
	} {
		code, body, err := call("/pods", tc.token, tc.cert)
		var list v1.PodList
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Items) != 1 {
			t.Errorf("%s: %d %q %v", tc.name, code, body, err)
		}
	}

	// The fingerprint in the log is the certificate's.
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	// The whole log: its tail fills with request lines on a busy machine.
	if want := "SHA256:" + pki.Fingerprint(leaf.Raw); !strings.Contains(n.berthLog(), want) {
		t.Errorf("berth's log does not print the fingerprint %s", want)
	}

	// exec over the secure port speaks the remote-command protocol and
	// returns the command's exit code; without a token nothing runs.
	pod := n.pod("web")
	execURL := func(cmd ...string) string {
		q := url.Values{"command": cmd, "output": {"1"}, "error": {"1"}}
		return base + "/exec/default/" + pod.Name + "/main?" + q.Encode()
	}
	remote := func(token, target string) error {
		cfg := &rest.Config{Host: base, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: served}}
		u, _ := url.Parse(target)
		ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stdout, stderr strings.Builder
		return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	}
	var exitErr utilexec.CodeExitError
	if err := remote("e2e-token", execURL("sh", "-c", "exit 5")); !errors.As(err, &exitErr) || exitErr.Code != 5 {
		t.Errorf("exec exit 5 over the secure port: %v", err)
	}
	if err := remote("", execURL("touch", "/tmp/unauthenticated")); err == nil {
		t.Error("an exec without a token was served")
	}
	if out := n.exec(pod, "main", "sh", "-c", "ls /tmp/unauthenticated 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Errorf("the unauthenticated exec ran: %q", out)
	}

	// The read-only port has no exec at all: the kubelet's 405.
	if body, err := n.get("/exec/default/web-" + nodeName + "/main?command=id"); err == nil || !strings.Contains(err.Error(), "405") {
		t.Errorf("exec on the read-only port: %v %s", err, body)
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "berth-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func newClientCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, user string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: []string{"ops"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
