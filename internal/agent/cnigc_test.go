package agent

import (
	"io"
	"log/slog"
	"testing"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// An external runtime's CNI state is not berth's: no collector, and the
// supervisor's events pass through unchanged.
func TestNoNetworkGCForAnExternalRuntime(t *testing.T) {
	cfg := &config.Config{RootDir: t.TempDir(), PodCIDR: "10.88.0.0/16"}
	gc, err := newNetworkGC(cfg, &runtimeHandle{endpoint: "unix:///run/other.sock"}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || gc != nil {
		t.Fatalf("newNetworkGC = %v, %v; want none", gc, err)
	}
	var got []string
	record := watchRestarts(nil, func(_, reason, _ string) { got = append(got, reason) })
	record("Warning", containerd.ReasonContainerdExited, "gone")
	if len(got) != 1 || got[0] != containerd.ReasonContainerdExited {
		t.Errorf("recorded %v", got)
	}
}
