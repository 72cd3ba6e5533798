package cgroupfs

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/cm"
)

// helperEnv turns the test binary into a child process that allocates
// memory inside a cgroup: "alloc:<MiB>".
const helperEnv = "BERTH_CGROUPFS_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper waits for a line on stdin (the test moves it into the cgroup
// meanwhile, since v1 charges pages to the cgroup that faults them in),
// touches the memory, says "ready", and holds it until stdin closes.
func runHelper(mode string) int {
	mib, err := strconv.Atoi(strings.TrimPrefix(mode, "alloc:"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return 2
	}
	buf := make([]byte, mib<<20)
	for i := 0; i < len(buf); i += os.Getpagesize() {
		buf[i] = 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, in)
	runtime.KeepAlive(buf)
	return 0
}

// uniquePath is a top-level cgroup path no other test or run uses.
func uniquePath(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "/berth-test-" + hex.EncodeToString(b)
}

// removeUnder is the tests' own cleanup, independent of the code under
// test: it rmdirs p, deepest first, under every hierarchy.
func removeUnder(t *testing.T, hierarchies []string, p string) {
	t.Helper()
	for _, h := range hierarchies {
		var dirs []string
		err := filepath.WalkDir(filepath.Join(h, p), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Errorf("cleanup: walk %s: %v", filepath.Join(h, p), err)
		}
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && err != unix.ENOENT {
				t.Errorf("cleanup: rmdir %s: %v", d, err)
			}
		}
	}
}

// startSleep starts a process the test owns; cleanup kills and reaps it.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(cmd) })
	return cmd
}

// stop kills and reaps cmd; stopping it twice is harmless.
func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// join moves pid into the cgroup dir (a hierarchy's copy of it).
func join(t *testing.T, dir string, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

// show renders a ResourceConfig for comparison and failure messages.
func show(c cm.ResourceConfig) string {
	return fmt.Sprintf("shares=%v quota=%v period=%v memory=%v pids=%v",
		deref(c.CPUShares), deref(c.CPUQuota), deref(c.CPUPeriod), deref(c.Memory), deref(c.PidsLimit))
}

func deref[T any](p *T) any {
	if p == nil {
		return "nil"
	}
	return *p
}
