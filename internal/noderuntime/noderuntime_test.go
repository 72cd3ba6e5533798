package noderuntime

import (
	"io"
	"log/slog"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/config"
)

// An external runtime's CNI state is not berth's: no collector, so the
// supervisor has no one to tell of its restarts either.
func TestNoNetworkGCForAnExternalRuntime(t *testing.T) {
	cfg := &config.Config{RootDir: t.TempDir(), PodCIDR: "10.88.0.0/16"}
	r := &Runtime{Endpoint: "unix:///run/other.sock", log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	gc, err := newNetworkGC(cfg, r)
	if err != nil || gc != nil {
		t.Fatalf("newNetworkGC = %v, %v; want none", gc, err)
	}
}

// Only containerd's own CRI socket is followed for task events when the
// CRI stream is missing.
func TestContainerdAddress(t *testing.T) {
	for _, tc := range []struct {
		name, runtime, endpoint, want string
		ok                            bool
	}{
		{"containerd", "containerd", "unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", true},
		{"CRI-O", "cri-o", "unix:///var/run/crio/crio.sock", "", false},
		{"not unix", "containerd", "tcp://127.0.0.1:1234", "", false},
		{"relative", "containerd", "unix://containerd.sock", "", false},
		{"no scheme", "containerd", "/run/containerd/containerd.sock", "", false},
	} {
		got, ok := containerdAddress(tc.runtime, tc.endpoint)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: containerdAddress(%q, %q) = %q, %v; want %q, %v", tc.name, tc.runtime, tc.endpoint, got, ok, tc.want, tc.ok)
		}
	}
}

// Only a stop or a deletion is news that asks for a relist: a creation or a
// start is a pod worker's own step.
func TestAsksForRelist(t *testing.T) {
	for ev, want := range map[runtimeapi.ContainerEventType]bool{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT: false,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT: false,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT: true,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT: true,
	} {
		if got := asksForRelist(ev); got != want {
			t.Errorf("%s: asks for a relist %v, want %v", ev, got, want)
		}
	}
}
