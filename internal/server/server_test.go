package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/images"
)

// fakeSource serves fixed pods and log files.
type fakeSource struct {
	pods   []v1.Pod
	checks []HealthCheck
	all    []v1.Event
	logs   map[string]string // "ns/pod/container" -> path
	logErr error
	events map[string][]v1.Event // "ns/pod" -> events

	nodeEvents []v1.Event
	devices    devicemanager.Snapshot
	images     []images.ImageStatus
	imagesErr  error
	node       v1.Node
	eviction   eviction.Status
	summary    *statsapi.Summary
	summaryErr error
	admissions map[string]admission.Result // "ns/pod" -> decision

	mu      sync.Mutex
	running map[string]bool
}

func (f *fakeSource) Pods() []v1.Pod                        { return f.pods }
func (f *fakeSource) NodeEvents() []v1.Event                { return f.nodeEvents }
func (f *fakeSource) Devices() devicemanager.Snapshot       { return f.devices }
func (f *fakeSource) Images() ([]images.ImageStatus, error) { return f.images, f.imagesErr }
func (f *fakeSource) HealthChecks() []HealthCheck           { return f.checks }
func (f *fakeSource) AllEvents() []v1.Event                 { return f.all }
func (f *fakeSource) Node() v1.Node                         { return f.node }
func (f *fakeSource) Eviction() eviction.Status             { return f.eviction }
func (f *fakeSource) Admission(namespace, pod string) (admission.Result, bool) {
	r, ok := f.admissions[namespace+"/"+pod]
	return r, ok
}
func (f *fakeSource) StatsSummary() (*statsapi.Summary, error) {
	return f.summary, f.summaryErr
}

func (f *fakeSource) Events(namespace, pod string) []v1.Event {
	return f.events[namespace+"/"+pod]
}

func (f *fakeSource) ContainerLog(namespace, pod, container string, previous bool) (string, string, error) {
	if f.logErr != nil {
		return "", "", f.logErr
	}
	key := namespace + "/" + pod + "/" + container
	if previous {
		return "", "", fmt.Errorf("previous terminated container %q in pod %s/%s: %w", container, namespace, pod, fs.ErrNotExist)
	}
	path, ok := f.logs[key]
	if !ok {
		return "", "", fmt.Errorf("no log for %s: %w", key, fs.ErrNotExist)
	}
	return path, "id-" + key, nil
}

func (f *fakeSource) ContainerRunning(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[id]
}

func (f *fakeSource) setRunning(id string, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[id] = running
}

func testPod(ns, name string, containers ...string) v1.Pod {
	p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "busybox"})
	}
	p.Status.Phase = v1.PodRunning
	return p
}

func logFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newTestServer(src Source) *Server {
	return New("127.0.0.1:0", src, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
}

func newLogsHandler(src LogSource) http.Handler {
	return NewLogsHandler(src, slog.New(slog.DiscardHandler))
}

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec
}

func TestHealthz(t *testing.T) {
	ok := func(context.Context) error { return nil }
	stuck := func(context.Context) error { return errors.New("relist has not completed for 3m5s (threshold 3m0s)") }
	healthy := []HealthCheck{{"runtime", ok}, {"pleg", ok}, {"syncloop", ok}}
	sick := []HealthCheck{{"runtime", ok}, {"pleg", stuck}, {"syncloop", ok}}
	tests := []struct {
		name     string
		checks   []HealthCheck
		target   string
		wantCode int
		wantBody string
	}{
		{"healthy", healthy, "/healthz", 200, "ok"},
		{"verbose", healthy, "/healthz?verbose", 200,
			"[+]ping ok\n[+]runtime ok\n[+]pleg ok\n[+]syncloop ok\nhealthz check passed\n"},
		{"unhealthy", sick, "/healthz", 500,
			"[+]ping ok\n[+]runtime ok\n[-]pleg failed: relist has not completed for 3m5s (threshold 3m0s)\n[+]syncloop ok\nhealthz check failed\n"},
		{"a failing check excluded", sick, "/healthz?exclude=pleg&verbose=1", 200,
			"[+]ping ok\n[+]runtime ok\n[+]syncloop ok\nhealthz check passed\n"},
		{"one check", sick, "/healthz/runtime", 200, "ok"},
		{"one failing check", sick, "/healthz/pleg", 500,
			"[-]pleg failed: relist has not completed for 3m5s (threshold 3m0s)\nhealthz check failed\n"},
		{"an unknown check", sick, "/healthz/disk", 404,
			"no health check \"disk\"; the checks are ping, runtime, pleg, syncloop\n"},
		{"an unknown exclusion", sick, "/healthz?exclude=disk", 400,
			"exclude: no health check \"disk\"; the checks are ping, runtime, pleg, syncloop\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(t, newTestServer(&fakeSource{checks: tt.checks}).Handler(), tt.target)
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestHealthzBoundsAHungCheck(t *testing.T) {
	hung := func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
	src := &fakeSource{checks: []HealthCheck{{"runtime", hung}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the request's context ends: the check must give up with it
	rec := httptest.NewRecorder()
	newTestServer(src).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil).WithContext(ctx))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "[-]runtime failed: no answer: context canceled") {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
}

func TestPods(t *testing.T) {
	tests := []struct {
		name string
		pods []v1.Pod
	}{
		{"none", nil},
		{"two", []v1.Pod{testPod("default", "web", "nginx"), testPod("kube-system", "dns", "coredns", "sidecar")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(t, newTestServer(&fakeSource{pods: tt.pods}).Handler(), "/pods")
			if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %s", rec.Code, rec.Header().Get("Content-Type"))
			}
			var raw map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
				t.Fatal(err)
			}
			if raw["apiVersion"] != "v1" || raw["kind"] != "PodList" {
				t.Errorf("apiVersion %v kind %v", raw["apiVersion"], raw["kind"])
			}
			if items, ok := raw["items"].([]any); !ok || len(items) != len(tt.pods) {
				t.Errorf("items = %#v, want %d pods", raw["items"], len(tt.pods))
			}
			var list v1.PodList
			if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
				t.Fatal(err)
			}
			if len(tt.pods) > 0 && !reflect.DeepEqual(list.Items, tt.pods) {
				t.Errorf("pods do not round-trip:\n got %+v\nwant %+v", list.Items, tt.pods)
			}
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	rec := httptest.NewRecorder()
	newTestServer(&fakeSource{}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/pods", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /pods = %d", rec.Code)
	}
}

func TestContainerLogs(t *testing.T) {
	const ts1, ts2 = "2024-05-01T10:00:01Z", "2024-05-01T10:00:02Z"
	path := logFile(t, ts1+" stdout F hello\n"+ts2+" stderr P wor\n"+ts2+" stderr F ld\n")
	multi := testPod("default", "multi", "app", "sidecar")
	multi.Spec.InitContainers = []v1.Container{{Name: "setup"}}
	src := &fakeSource{
		pods: []v1.Pod{testPod("default", "web", "nginx"), multi},
		logs: map[string]string{
			"default/web/nginx":      path,
			"default/multi/sidecar":  filepath.Join(t.TempDir(), "missing.log"),
			"default/multi/app":      path,
			"default/multi/notthere": path,
		},
	}
	tests := []struct {
		name     string
		target   string
		logErr   error
		wantCode int
		wantBody string // exact for 200, substring otherwise
	}{
		{name: "whole log", target: "/containerLogs/default/web/nginx", wantCode: 200, wantBody: "hello\nworld\n"},
		{name: "timestamps", target: "/containerLogs/default/web/nginx?timestamps=true", wantCode: 200, wantBody: ts1 + " hello\n" + ts2 + " world\n"},
		{name: "tail", target: "/containerLogs/default/web/nginx?tailLines=1", wantCode: 200, wantBody: "world\n"},
		{name: "tail 0", target: "/containerLogs/default/web/nginx?tailLines=0", wantCode: 200, wantBody: ""},
		{name: "unknown pod", target: "/containerLogs/default/nope/nginx", wantCode: 404, wantBody: "pod default/nope not found"},
		{name: "wrong namespace", target: "/containerLogs/other/web/nginx", wantCode: 404, wantBody: "pod other/web not found"},
		{name: "unknown container", target: "/containerLogs/default/multi/db", wantCode: 404,
			wantBody: `container "db" not found in pod default/multi; its containers are: setup, app, sidecar`},
		{name: "no previous instance", target: "/containerLogs/default/web/nginx?previous=true", wantCode: 404, wantBody: "previous terminated container"},
		{name: "log file missing", target: "/containerLogs/default/multi/sidecar", wantCode: 404, wantBody: "missing.log"},
		{name: "no log yet", target: "/containerLogs/default/multi/setup", wantCode: 404, wantBody: "no log for default/multi/setup"},
		{name: "runtime error", target: "/containerLogs/default/web/nginx", logErr: errors.New("runtime is down"), wantCode: 500, wantBody: "runtime is down"},
		{name: "bad tailLines", target: "/containerLogs/default/web/nginx?tailLines=ten", wantCode: 400, wantBody: `tailLines: "ten" is not a number`},
		{name: "negative tailLines", target: "/containerLogs/default/web/nginx?tailLines=-1", wantCode: 400, wantBody: "tailLines: -1"},
		{name: "unsupported option", target: "/containerLogs/default/web/nginx?stream=Stderr", wantCode: 400, wantBody: "stream is not supported yet"},
		{name: "since time", target: "/containerLogs/default/web/nginx?sinceTime=2024-05-01T10:00:02Z", wantCode: 200, wantBody: "world\n"},
		{name: "since seconds: the log is years old", target: "/containerLogs/default/web/nginx?sinceSeconds=3600", wantCode: 200, wantBody: ""},
		{name: "limit bytes", target: "/containerLogs/default/web/nginx?limitBytes=3", wantCode: 200, wantBody: "hel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src.logErr = tt.logErr
			rec := get(t, newLogsHandler(src), tt.target)
			body := rec.Body.String()
			if rec.Code != tt.wantCode {
				t.Fatalf("code %d (%q), want %d", rec.Code, body, tt.wantCode)
			}
			if tt.wantCode == 200 {
				if body != tt.wantBody {
					t.Errorf("body %q, want %q", body, tt.wantBody)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
			} else if !strings.Contains(body, tt.wantBody) {
				t.Errorf("body %q does not contain %q", body, tt.wantBody)
			}
		})
	}
}

func TestParseLogOptions(t *testing.T) {
	tests := []struct {
		query   string
		want    v1.PodLogOptions
		wantErr string
	}{
		{query: "", want: v1.PodLogOptions{}},
		{query: "follow=true&previous=1&timestamps=yes", want: v1.PodLogOptions{Follow: true, Previous: true, Timestamps: true}},
		{query: "follow", want: v1.PodLogOptions{Follow: true}},
		{query: "follow=false&timestamps=0&previous=FALSE", want: v1.PodLogOptions{}},
		{query: "tailLines=20", want: v1.PodLogOptions{TailLines: ptr.To[int64](20)}},
		{query: "tailLines=", wantErr: "tailLines"},
		{query: "tailLines=-5", wantErr: "greater than or equal to 0"},
		{query: "limitBytes=10", want: v1.PodLogOptions{LimitBytes: ptr.To[int64](10)}},
		{query: "limitBytes=0", wantErr: "limitBytes: 0 must be greater than or equal to 1"},
		{query: "sinceSeconds=60", want: v1.PodLogOptions{SinceSeconds: ptr.To[int64](60)}},
		{query: "sinceSeconds=x", wantErr: "sinceSeconds"},
		{query: "sinceTime=2024-01-01T00:00:00Z", want: v1.PodLogOptions{SinceTime: &metav1.Time{Time: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{query: "sinceTime=yesterday", wantErr: "sinceTime"},
		{query: "sinceSeconds=1&sinceTime=2024-01-01T00:00:00Z", wantErr: "at most one"},
		{query: "stream=Stdout", wantErr: "stream is not supported yet"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseLogOptions(q)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestFollowContainerLog(t *testing.T) {
	const ts = "2024-05-01T10:00:01Z"
	path := logFile(t, ts+" stdout F started\n")
	src := &fakeSource{
		pods:    []v1.Pod{testPod("default", "web", "nginx")},
		logs:    map[string]string{"default/web/nginx": path},
		running: map[string]bool{"id-default/web/nginx": true},
	}
	hs := httptest.NewServer(newLogsHandler(src))
	defer hs.Close()

	resp, err := http.Get(hs.URL + "/containerLogs/default/web/nginx?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stream ended (%v), want %q", lines.Err(), want)
		}
		if got := lines.Text(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	// The first line arrives while the container runs: the stream is
	// flushed, not held until the end.
	next("started")

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(ts + " stdout F bye\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	next("bye")

	// The container exits without writing: the follower's poll learns it
	// and ends the stream.
	src.setRunning("id-default/web/nginx", false)
	if lines.Scan() {
		t.Errorf("unexpected line %q after the container exited", lines.Text())
	}
	if err := lines.Err(); err != nil {
		t.Errorf("stream ended with %v", err)
	}
}

func TestServeAndShutdown(t *testing.T) {
	const ts = "2024-05-01T10:00:01Z"
	src := &fakeSource{
		pods:    []v1.Pod{testPod("default", "web", "nginx")},
		logs:    map[string]string{"default/web/nginx": logFile(t, ts+" stdout F up\n")},
		running: map[string]bool{"id-default/web/nginx": true},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	srv := newTestServer(src)
	// The read-only API serves no logs; a log stream is what a server can
	// be busy with when it must stop, so this one serves them.
	srv.mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", newLogsHandler(src))
	go func() { served <- srv.Serve(ctx, ln) }()

	base := "http://" + ln.Addr().String()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}

	// A follower of a running container must not hold up shutdown.
	stream, err := http.Get(base + "/containerLogs/default/web/nginx?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	lines := bufio.NewScanner(stream.Body)
	if !lines.Scan() || lines.Text() != "up" {
		t.Fatalf("first line %q (%v)", lines.Text(), lines.Err())
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(shutdownTimeout / 2):
		t.Fatal("Serve did not return promptly after its context ended")
	}
	for lines.Scan() {
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("server still answering after shutdown")
	}
}

func TestRunReportsListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = New(ln.Addr().String(), &fakeSource{}, nil, slog.New(slog.DiscardHandler)).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Run on a busy port = %v", err)
	}
}
