package conformance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A ginkgo that ignores SIGINT is killed after the grace with its
// children, as ginkgo's e2e.test processes would otherwise outlive it.
func TestRunPassKillsTheGroup(t *testing.T) {
	old := interruptGrace
	interruptGrace = time.Second
	defer func() { interruptGrace = old }()
	dir := t.TempDir()
	ginkgo := filepath.Join(dir, "ginkgo")
	script := "#!/bin/sh\ntrap '' INT\nsleep 1000 &\necho $! > child.pid\nwait\n"
	if err := os.WriteFile(ginkgo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := filepath.Join(dir, "out")
	pidFile := filepath.Join(out, "p", "child.pid")
	go func() {
		// Cancel once the child runs.
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(pidFile); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	_, err := RunPass(ctx, RunConfig{Ginkgo: ginkgo, E2ETest: "e2e.test", Procs: 2, OutDir: out}, Pass{Name: "p"})
	if err == nil {
		t.Fatal("RunPass read a report that no one wrote")
	}
	data, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(data)))
	if perr != nil {
		t.Fatal(perr)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("ginkgo's child %d outlived it", pid)
		}
	}
}
