package server

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/authn"
	"github.com/berth-dev/berth/internal/pki"
)

// TestSecure serves the secure API over real TLS: only authenticated
// callers reach any handler, streaming included, and the read-only API
// has no streaming at all.
func TestSecure(t *testing.T) {
	dir := t.TempDir()
	cert, err := pki.SelfSigned(filepath.Join(dir, "pki"), "node-1", []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("s3cret,alice,1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := authn.LoadTokens(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	var streamed int
	streaming := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamed++
		io.WriteString(w, "streamed "+r.URL.Path)
	})
	logPath := filepath.Join(dir, "0.log")
	if err := os.WriteFile(logPath, []byte("2024-05-01T10:00:01Z stdout F hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{pods: []v1.Pod{testPod("default", "web", "app")}, logs: map[string]string{"default/web/app": logPath}}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert.Certificate}, MinVersion: tls.VersionTLS12}
	srv := NewSecure("127.0.0.1:0", src, prometheus.NewRegistry(), streaming, authn.New(false, tokens), tlsConfig,
		slog.New(slog.DiscardHandler))
	addr := serveTLS(t, srv)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: certPool(t, cert.CertFile)}}}
	base := "https://" + addr
	call := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	for _, path := range []string{"/pods", "/healthz", "/exec/default/web/app?command=id"} {
		if code, _ := call(path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, code)
		}
		if code, _ := call(path, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", path, code)
		}
	}
	if streamed != 0 {
		t.Fatalf("an unauthenticated exec reached the streaming handler %d times", streamed)
	}
	code, body := call("/pods", "s3cret")
	var list v1.PodList
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 {
		t.Errorf("/pods with the token: %d %q", code, body)
	}
	if code, body := call("/exec/default/web/app?command=id", "s3cret"); code != 200 || body != "streamed /exec/default/web/app" {
		t.Errorf("exec with the token: %d %q", code, body)
	}
	// Logs are served here, to authenticated callers only.
	if code, _ := call("/containerLogs/default/web/app", ""); code != http.StatusUnauthorized {
		t.Errorf("/containerLogs without a token: %d, want 401", code)
	}
	if code, body := call("/containerLogs/default/web/app", "s3cret"); code != 200 || body != "hello\n" {
		t.Errorf("/containerLogs with the token: %d %q", code, body)
	}

	// Plain HTTP on the TLS port is not served.
	resp, err := http.Get("http://" + addr + "/pods")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS port: %d", resp.StatusCode)
		}
	}
}

// The read-only API, which anyone on the host can reach, serves what the
// kubelet's read-only port serves: no container's log, no exec, attach or
// port forwarding, no profile; each of those paths gets the kubelet's 405.
func TestReadOnlyHasNoDebuggingHandlers(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(logPath, []byte("2024-05-01T10:00:01Z stdout F secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{
		pods: []v1.Pod{testPod("default", "web", "app")},
		logs: map[string]string{"default/web/app": logPath},
	}
	h := newTestServer(src).Handler()
	for _, path := range []string{
		"/containerLogs/default/web/app", "/containerLogs/default/web/app?follow=true",
		"/exec/default/web/app?command=id", "/attach/default/web/app", "/portForward/default/web",
		"/run/default/web/app", "/logs/", "/debug/pprof/", "/runningpods/",
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if rec.Code != http.StatusMethodNotAllowed || strings.TrimSpace(rec.Body.String()) != "Debug endpoints are disabled." {
				t.Errorf("%s %s on the read-only API: %d %q, want 405 Debug endpoints are disabled.", method, path, rec.Code, rec.Body.String())
			}
		}
	}
	// What the kubelet's read-only port does serve is still there.
	for _, path := range []string{"/healthz", "/pods"} {
		if rec := get(t, h, path); rec.Code != http.StatusOK {
			t.Errorf("GET %s on the read-only API: %d", path, rec.Code)
		}
	}
}

func TestEvents(t *testing.T) {
	src := &fakeSource{all: []v1.Event{
		{Reason: "Scheduled", InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "web"}},
		{Reason: "NodeReady", InvolvedObject: v1.ObjectReference{Kind: "Node", Name: "node-1"}},
	}}
	rec := get(t, newTestServer(src).Handler(), "/events")
	var list v1.EventList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != 200 {
		t.Fatalf("%d %q: %v", rec.Code, rec.Body.String(), err)
	}
	if list.Kind != "EventList" || len(list.Items) != 2 || list.Items[1].Reason != "NodeReady" {
		t.Errorf("got %+v", list)
	}
	rec = get(t, newTestServer(&fakeSource{}).Handler(), "/events")
	if !strings.Contains(rec.Body.String(), `"items":[]`) {
		t.Errorf("no events: %q, want an empty items list", rec.Body.String())
	}
}
