package noderuntime

import (
	"io"
	"log/slog"
	"testing"

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
