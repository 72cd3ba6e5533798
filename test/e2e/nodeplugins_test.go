package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/test/cluster"
)

// nodePluginAddons returns the addons, the node plugins (DRA and CSI
// drivers, the external-provisioner) among them, built unless cached.
func nodePluginAddons(t *testing.T) cluster.Addons {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Minute)
	defer cancel()
	var buildLog strings.Builder
	addons, err := cluster.BuildAddons(ctx, &buildLog)
	if err != nil {
		t.Fatalf("building the addons: %v\n%s", err, buildLog.String())
	}
	return addons
}

// pluginSocketsDir makes a directory for a node's plugin sockets, removed
// after the test, and returns it with the registration directory in it.
// Short (under /tmp): a socket's path must fit a unix socket address.
func pluginSocketsDir(t *testing.T, prefix string) (dir, registry string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, filepath.Join(dir, "registry")
}

// stopAfterTest stops a plugin process when the test ends, logging the
// tail of its log first if the test failed.
func stopAfterTest(t *testing.T, what, logPath string, stop func() error) {
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s log:\n%s", what, tail(string(b), 8000))
			}
		}
		stop()
	})
}
