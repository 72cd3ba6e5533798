package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// suiteRuntimeDir is the directory of the containerd every node of this
// run manages (BERTH_E2E_CONTAINERD: containerd, containerd-shim-runc-v2 and
// runc), first in berth's PATH; "" runs the host's containerd from PATH.
var suiteRuntimeDir = os.Getenv("BERTH_E2E_CONTAINERD")

// containerd2Env names the directory of containerd 2 and its runc, built
// from their Go modules, for the tests of what only containerd 2 can do.
const containerd2Env = "BERTH_CONTAINERD2_BIN"

// containerd2Dir returns that directory, or fails the test: a feature test
// that cannot get containerd 2 must not pass by skipping.
func containerd2Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(containerd2Env)
	if dir == "" {
		t.Fatalf("%s is not set: it names the directory of containerd 2, its shim and runc (make test sets it)", containerd2Env)
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc"} {
		if fi, err := os.Stat(filepath.Join(dir, bin)); err != nil || fi.Mode()&0o111 == 0 {
			t.Fatalf("%s=%s has no executable %s: %v", containerd2Env, dir, bin, err)
		}
	}
	return dir
}

// startNodeOnContainerd2 starts berth like startNode, managing containerd 2.
func startNodeOnContainerd2(t testing.TB, extraArgs ...string) *node {
	t.Helper()
	return startNodeWithRuntime(t, "", containerd2Dir(t), extraArgs...)
}
