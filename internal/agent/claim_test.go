package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/config"
)

// freePort returns a port nothing listens on now.
func freePort(t *testing.T) int32 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

// A claim that fails gives back what it took before, and touches nothing
// after: the local API's port is free again, the root dir is not made.
func TestClaimFailureReleasesWhatItTook(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	root := t.TempDir() + "/root"
	cfg := &config.Config{Address: "127.0.0.1", ReadOnlyPort: freePort(t), RootDir: root, PodLogsDir: root + "/logs"}
	cfg.Serving.Port = int32(busy.Addr().(*net.TCPAddr).Port)

	_, err = claim(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "secure API") || !strings.Contains(err.Error(), strconv.Itoa(int(cfg.Serving.Port))) {
		t.Fatalf("claim = %v, want the secure API's port in use", err)
	}
	again, err := listen(cfg.Address, cfg.ReadOnlyPort)
	if err != nil {
		t.Fatalf("the local API's port was not given back: %v", err)
	}
	again.Close()
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the root dir was made before the claim failed: %v", err)
	}
}
