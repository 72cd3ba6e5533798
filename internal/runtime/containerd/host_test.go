package containerd

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Helpers for the tests that run a real containerd. Each test gets its own
// short root under /tmp (unix socket paths must stay under 108 bytes, which
// t.TempDir's long names can break) and leaves nothing behind: processes
// started under the root, mounts below it, the root itself.

// testRoot makes a root dir and registers its cleanup.
func testRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "berth-ctd-")
	if err != nil {
		t.Fatal(err)
	}
	runDirExisted := map[string]bool{}
	for _, d := range sharedRunDirs() {
		_, err := os.Stat(d)
		runDirExisted[d] = err == nil
	}
	t.Cleanup(func() {
		if procs := killProcessesUnder(root); len(procs) > 0 && !t.Failed() {
			t.Errorf("processes left running under %s: %v", root, procs)
		}
		if mounts := unmountUnder(t, root); len(mounts) > 0 && !t.Failed() {
			t.Errorf("mounts left under %s: %v", root, mounts)
		}
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("remove %s: %v", root, err)
		}
		// containerd's shims put their sockets in a host-wide dir keyed by
		// address; remove the dirs only if this test created them and they
		// are empty (os.Remove never removes a dir with content).
		for _, d := range sharedRunDirs() {
			if !runDirExisted[d] {
				_ = os.Remove(d)
			}
		}
	})
	writeTestCNIConfig(t, root)
	return root
}

// writeTestCNIConfig gives containerd a network config in the default
// CNIConfDir: its CRI reports NetworkReady only with one, and Start waits
// for it. The tests run host-network pods only, so loopback is enough.
func writeTestCNIConfig(t *testing.T, root string) {
	t.Helper()
	dir := filepath.Join(root, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := `{"cniVersion": "0.4.0", "name": "berth-test", "plugins": [{"type": "loopback"}]}`
	if err := os.WriteFile(filepath.Join(dir, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sharedRunDirs are the dirs outside the root that containerd's shims
// create, deepest first.
func sharedRunDirs() []string { return []string{"/run/containerd/s", "/run/containerd"} }

// killProcessesUnder kills every process whose command line mentions root
// (containerd and its shims, which name the socket) and returns them.
func killProcessesUnder(root string) []string {
	var found []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), root+"/") {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		found = append(found, p.Name()+" "+strings.Join(args, " "))
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if sock := shimSocket(args); sock != "" {
			// A killed shim cannot remove its socket.
			defer os.Remove(sock)
		}
		for i := 0; i < 500 && syscall.Kill(pid, 0) == nil; i++ {
			if st, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z ") {
				break // a zombie of this test process: gone for the host
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return found
}

// shimSocket is where a containerd-shim-runc-v2 with these arguments
// listens: containerd 1.6 keys it by the hash of address, namespace and ID
// under the host-wide /run/containerd/s.
func shimSocket(args []string) string {
	flags := map[string]string{}
	for i := 1; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags[strings.TrimLeft(args[i], "-")] = args[i+1]
		}
	}
	if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") || flags["address"] == "" || flags["id"] == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Join(flags["address"], flags["namespace"], flags["id"])))
	return filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:]))
}

// mountsUnder lists the mount points at or below root, deepest first.
func mountsUnder(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == root || strings.HasPrefix(mp, root+"/") {
			out = append(out, mp)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

func unmountUnder(t *testing.T, root string) []string {
	t.Helper()
	mounts := mountsUnder(t, root)
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mp, err)
		}
	}
	return mounts
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// startManaged starts a containerd under root; it fails the test (never
// skips) when containerd cannot start. Stop runs at cleanup.
func startManaged(t *testing.T, root string) *Managed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Start(ctx, Options{RootDir: root, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	t.Cleanup(func() { stopManaged(t, m) })
	return m
}

func stopManaged(t *testing.T, m *Managed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		t.Errorf("stop containerd: %v", err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// criClients dials CRI on a managed containerd's socket.
func criClients(t *testing.T, m *Managed) (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient) {
	t.Helper()
	conn, err := grpc.NewClient(m.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
}

// buildPause compiles cmd/berth-pause the way the Makefile does.
func buildPause(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "berth-pause")
	cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", bin, "github.com/berth-dev/berth/cmd/berth-pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build berth-pause: %v\n%s", err, out)
	}
	return bin
}

// removeCgroup removes a cgroup parent and what runc made below it from
// every hierarchy (cgroup v1 or v2), killing what still runs there: a test
// that failed half-way may leave a pod's processes behind.
func removeCgroup(t *testing.T, parent string) {
	t.Helper()
	var dirs []string
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	hierarchies = append(hierarchies, "/sys/fs/cgroup")
	for _, h := range hierarchies {
		_ = filepath.WalkDir(filepath.Join(h, parent), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(procs)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		var err error
		// A killed process leaves its cgroup a moment after the signal.
		for i := 0; i < 200; i++ {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove cgroup %s: %v", d, err)
		}
	}
}
