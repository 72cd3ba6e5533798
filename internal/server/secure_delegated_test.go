package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/authn"
	"github.com/berth-dev/berth/internal/pki"
)

// apiserverClientName is the user of the API server's kubelet client
// certificate, which may do everything on the node.
const apiserverClientName = "kube-apiserver-kubelet-client"

// TestSecureDelegated serves the secure API over real TLS as a cluster
// node does: the API server vouches for tokens and decides what each
// caller may do. Nobody unauthenticated reaches a handler, nothing a
// caller may not do runs, and the rest is served and logged with its user.
func TestSecureDelegated(t *testing.T) {
	api := fake.NewClientset()
	api.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "viewer-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "viewer"}}
		}
		return true, tr, nil
	})
	api.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra.Name == "node-1" && (sar.Spec.User == apiserverClientName ||
			(sar.Spec.User == "viewer" && ra.Verb == "get" && ra.Subresource == "stats"))
		return true, sar, nil
	})
	gate, err := authn.NewGate(api, authn.Config{
		NodeName:             "node-1",
		ClientCertificates:   true,
		TokenWebhook:         true,
		TokenWebhookCacheTTL: 2 * time.Minute,
		AuthorizationMode:    kubeletconfigv1beta1.KubeletAuthorizationModeWebhook,
		AuthorizedTTL:        5 * time.Minute,
		UnauthorizedTTL:      30 * time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cert, err := pki.SelfSigned(filepath.Join(dir, "pki"), "node-1", []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, clientCert := clientCertificate(t, apiserverClientName, "system:masters")
	// As the agent configures it: a certificate, if given, must verify.
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert.Certificate}, MinVersion: tls.VersionTLS12,
		ClientCAs: ca, ClientAuth: tls.VerifyClientCertIfGiven}
	var streamed atomic.Int32
	streaming := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamed.Add(1)
		io.WriteString(w, "streamed "+r.URL.Path)
	})
	src := &fakeSource{pods: []v1.Pod{testPod("default", "web", "app")}, summary: &statsapi.Summary{}}
	logs := &syncBuffer{}
	srv := NewSecure("127.0.0.1:0", src, prometheus.NewRegistry(), streaming, gate, tlsConfig,
		slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	addr := serveTLS(t, srv)
	roots := certPool(t, cert.CertFile)
	newClient := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	}
	anonymous, apiserver := newClient(), newClient(clientCert)
	base := "https://" + addr

	tests := []struct {
		name         string
		client       *http.Client
		method, path string
		token        string
		wantCode     int
		wantBody     string
		wantStreamed bool
	}{
		{name: "nobody", client: anonymous, method: "GET", path: "/pods", wantCode: 401},
		{name: "nobody execs", client: anonymous, method: "POST", path: "/exec/default/web/app?command=id", wantCode: 401},
		{name: "a token the API server does not know", client: anonymous, method: "GET", path: "/stats/summary",
			token: "forged", wantCode: 401},
		{name: "a viewer reads stats", client: anonymous, method: "GET", path: "/stats/summary",
			token: "viewer-token", wantCode: 200},
		{name: "a viewer may not exec", client: anonymous, method: "POST", path: "/exec/default/web/app?command=id",
			token: "viewer-token", wantCode: 403,
			wantBody: "Forbidden (user=viewer, verb=create, resource=nodes, subresource(s)=[proxy])"},
		{name: "a viewer may not port-forward", client: anonymous, method: "GET", path: "/portForward/default/web?port=80",
			token: "viewer-token", wantCode: 403,
			wantBody: "Forbidden (user=viewer, verb=get, resource=nodes, subresource(s)=[proxy])"},
		{name: "a viewer may not list pods", client: anonymous, method: "GET", path: "/pods",
			token: "viewer-token", wantCode: 403,
			wantBody: "Forbidden (user=viewer, verb=get, resource=nodes, subresource(s)=[pods proxy])"},
		{name: "the API server execs", client: apiserver, method: "POST", path: "/exec/default/web/app?command=id",
			wantCode: 200, wantBody: "streamed /exec/default/web/app", wantStreamed: true},
		{name: "the API server lists pods", client: apiserver, method: "GET", path: "/pods", wantCode: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := streamed.Load()
			req, _ := http.NewRequest(tt.method, base+tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := tt.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
			if ran := streamed.Load() != before; ran != tt.wantStreamed {
				t.Errorf("the streaming handler ran: %v", ran)
			}
		})
	}

	// Each request is logged with its user, a refused one too; an
	// anonymous one has none.
	lines := strings.Split(logs.String(), "\n")
	logged := func(parts ...string) bool {
		for _, line := range lines {
			if !strings.Contains(line, `msg=request`) {
				continue
			}
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true
			}
		}
		return false
	}
	for _, want := range [][]string{
		{`method=POST uri="/exec/default/web/app?command=id" status=403`, "user=viewer authn=webhook"},
		{`level=DEBUG msg=request method=GET uri=/stats/summary status=200`, "user=viewer authn=webhook"},
		{`method=POST uri="/exec/default/web/app?command=id" status=200`, "user=kube-apiserver-kubelet-client authn=x509"},
		{`uri=/pods status=401`},
	} {
		if !logged(want...) {
			t.Errorf("no request logged with %q:\n%s", want, logs.String())
		}
	}
	if logged("status=401", "user=") {
		t.Errorf("a 401 logged with a user:\n%s", logs.String())
	}
}

// clientCertificate makes a CA and a client certificate it signed for
// user in group, as the API server's kubelet client certificate is.
func clientCertificate(t *testing.T, user, group string) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user, Organization: []string{group}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}
