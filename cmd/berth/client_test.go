package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/server"
)

// apiSource backs a real local API with fixed pods and one log file.
type apiSource struct {
	pods    []v1.Pod
	logPath string
	events  map[string][]v1.Event // "namespace/pod" -> events

	nodeEvents []v1.Event
	devices    devicemanager.Snapshot
	images     []images.ImageStatus
	imagesErr  error
	node       v1.Node
	eviction   eviction.Status
	admissions map[string]admission.Result // "namespace/pod" -> decision
}

func (s *apiSource) Pods() []v1.Pod                        { return s.pods }
func (s *apiSource) NodeEvents() []v1.Event                { return s.nodeEvents }
func (s *apiSource) Devices() devicemanager.Snapshot       { return s.devices }
func (s *apiSource) Images() ([]images.ImageStatus, error) { return s.images, s.imagesErr }
func (s *apiSource) HealthChecks() []server.HealthCheck    { return nil }
func (s *apiSource) Node() v1.Node                         { return s.node }
func (s *apiSource) Eviction() eviction.Status             { return s.eviction }
func (s *apiSource) StatsSummary() (*statsapi.Summary, error) {
	return nil, errors.New("no stats in this test")
}
func (s *apiSource) ContainerRunning(string) bool { return false }
func (s *apiSource) Admission(ns, pod string) (admission.Result, bool) {
	r, ok := s.admissions[ns+"/"+pod]
	return r, ok
}
func (s *apiSource) Events(ns, pod string) []v1.Event {
	return s.events[ns+"/"+pod]
}
func (s *apiSource) AllEvents() []v1.Event {
	all := slices.Clone(s.nodeEvents)
	for _, events := range s.events {
		all = append(all, events...)
	}
	return all
}
func (s *apiSource) ContainerLog(ns, pod, c string, previous bool) (string, string, error) {
	if previous {
		return "", "", fmt.Errorf("previous terminated container %q in pod %s/%s: %w", c, ns, pod, fs.ErrNotExist)
	}
	return s.logPath, "id", nil
}

func testLogSource(t *testing.T) *apiSource {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "0.log")
	content := "2024-05-01T10:00:01Z stdout F one\n2024-05-01T10:00:02Z stdout F two\n"
	if err := os.WriteFile(logPath, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return &apiSource{pods: testList().Items, logPath: logPath}
}

func startAPI(t *testing.T) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(server.New("", testLogSource(t), nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)
	return hs
}

// startLogSocket serves the logs on a unix socket, as the admin socket
// does, and returns its path.
func startLogSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "berth-cli-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: server.NewLogsHandler(testLogSource(t), slog.New(slog.DiscardHandler))}}
	hs.Start()
	t.Cleanup(hs.Close)
	return socket
}

func TestClientPods(t *testing.T) {
	hs := startAPI(t)
	// --server may be given without a scheme.
	list, err := newAPIClient(strings.TrimPrefix(hs.URL, "http://")).pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 || list.Kind != "PodList" {
		t.Errorf("got %d pods, kind %q", len(list.Items), list.Kind)
	}
}

// berth logs reads the log from the admin socket: the read-only port
// serves none.
func TestClientContainerLogs(t *testing.T) {
	c := newSocketClient(startLogSocket(t))
	tests := []struct {
		name      string
		pod       string
		container string
		q         logQuery
		want      string
		wantErr   string
	}{
		{name: "all", pod: "web", container: "app", q: logQuery{tailLines: -1}, want: "one\ntwo\n"},
		{name: "tail and timestamps", pod: "web", container: "app", q: logQuery{tailLines: 1, timestamps: true}, want: "2024-05-01T10:00:02Z two\n"},
		{name: "unknown container", pod: "web", container: "db", q: logQuery{tailLines: -1},
			wantErr: `container "db" not found in pod default/web; its containers are: app`},
		{name: "unknown pod", pod: "nope", container: "app", q: logQuery{tailLines: -1}, wantErr: "pod default/nope not found"},
		{name: "no previous", pod: "web", container: "app", q: logQuery{tailLines: -1, previous: true}, wantErr: "previous terminated container"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := c.containerLogs(context.Background(), &out, "default", tt.pod, tt.container, tt.q)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func TestClientUnreachable(t *testing.T) {
	// A port that was just free and is closed again refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = newAPIClient(addr).pods(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach berth's local API at http://"+addr) {
		t.Errorf("err = %v", err)
	}
}

func TestLogQueryValues(t *testing.T) {
	tests := []struct {
		q    logQuery
		want string
	}{
		{logQuery{tailLines: -1}, ""},
		{logQuery{follow: true, previous: true, timestamps: true, tailLines: 0}, "follow=true&previous=true&tailLines=0&timestamps=true"},
	}
	for _, tt := range tests {
		if got := tt.q.values().Encode(); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.q, got, tt.want)
		}
	}
}
