package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildPause compiles the program the way the Makefile does.
func buildPause(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "berth-pause")
	cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startPause runs the pause binary as PID 1 of a new PID namespace, where a
// pod's sandbox runs it, and stops it when the test ends.
func startPause(t *testing.T, bin string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// waitFor polls cond until it holds or the deadline passes: it observes a
// state the test cannot be told about, not a period.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReapsOrphansAndExitsZeroOnSignal(t *testing.T) {
	bin := buildPause(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startPause(t, bin)
			// Reaping an orphan proves the signal loop runs: a SIGTERM that
			// came before it would meet the Go runtime's default (exit 2).
			reapOneOrphan(t, cmd.Process.Pid)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("pause exited with %v after %v, want status 0", err, sig)
			}
		})
	}
}

// reapOneOrphan leaves a sleeper behind in pause's PID namespace: when the
// shell that started it exits, the sleeper is reparented to pause, which
// must reap it once it exits in turn. The sleeper must not hold the
// output pipe, or nsenter would return only after it is gone.
func reapOneOrphan(t *testing.T, pid int) {
	t.Helper()
	out, err := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--pid", "--",
		"/bin/busybox", "sh", "-c", "/bin/busybox sleep 0.2 >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	waitFor(t, "the orphan to be reparented to pause", func() bool { return len(children(t, pid)) > 0 })
	waitFor(t, "pause to reap the orphan", func() bool { return len(children(t, pid)) == 0 })
}

// children lists the PIDs whose parent is pid, zombies included.
func children(t *testing.T, pid int) []string {
	t.Helper()
	var out []string
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Fields(string(bytes.TrimSpace(b)))...)
	}
	return out
}
