package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bins is the directory holding the berth and berth-pause binaries under test.
var bins string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: the end-to-end tests must run as root (they run containers)")
		return 1
	}
	for _, tool := range []string{"containerd", "runc", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s is not installed (make test installs it): %v\n", tool, err)
			return 1
		}
	}
	for _, f := range []string{"/usr/lib/cni/bridge", busyboxPath} {
		if _, err := os.Stat(f); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s is missing (make test installs it): %v\n", f, err)
			return 1
		}
	}
	bins = os.Getenv("BERTH_BIN")
	if bins == "" {
		dir, err := os.MkdirTemp("", "berth-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		for name, pkg := range map[string]string{"berth": "../../cmd/berth", "berth-pause": "../../cmd/berth-pause", "berth-bench": "../../cmd/berth-bench"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: building %s: %v\n%s", name, err, out)
				return 1
			}
		}
		bins = dir
	}
	return m.Run()
}
