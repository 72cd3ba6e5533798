package containerd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// waitPidExit sees a process exit that is not its child to wait for: here
// a child of the test left unreaped, a zombie, as an adopted containerd
// is when nobody reaps it.
func TestWaitPidExit(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitPidExit(ctx, pid, clock.RealClock{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("with ctx done, waitPidExit = %v, want context.Canceled", err)
	}

	done := make(chan error, 1)
	go func() { done <- waitPidExit(context.Background(), pid, clock.RealClock{}) }()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waitPidExit = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("waitPidExit did not return a minute after the process died")
	}
	if processAlive(pid) {
		t.Error("processAlive counts a zombie as alive")
	}
	if err := waitPidExit(context.Background(), pid, clock.RealClock{}); err != nil {
		t.Errorf("waitPidExit on a dead process = %v", err)
	}
}

type recorded struct {
	mu      sync.Mutex
	reasons []string
}

func (r *recorded) record(_, reason, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *recorded) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}

// An adopted containerd that dies is started again, like one berth
// started; the new one is berth's, so it is the one returned to stop.
func TestSuperviseRestartsAdoptedContainerd(t *testing.T) {
	root := testRoot(t)
	first := startManaged(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adopted, err := Start(ctx, Options{RootDir: root, Log: testLogger(t)})
	if err != nil || adopted.StartedByUs() {
		t.Fatalf("adopt: %v (started by us: %v)", err, err == nil && adopted.StartedByUs())
	}

	superviseCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising()
	var events recorded
	result := make(chan *Managed, 1)
	go func() { result <- Supervise(superviseCtx, adopted, clock.RealClock{}, events.record) }()

	if err := syscall.Kill(first.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Start returns after containerd answers (it then looks for shims to
	// reap), so the restart is done once its event is recorded: stopping
	// sooner could cut it short.
	pidFile := filepath.Join(root, "containerd", "containerd.pid")
	for {
		data, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		got := events.get()
		if pid > 1 && pid != first.Pid() && len(got) == 2 && probeCRI(ctx, adopted.Address(), true) == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no new containerd ready on %s: pid file %q, events %v", adopted.Address(), data, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopSupervising()
	var current *Managed
	select {
	case current = <-result:
	case <-ctx.Done():
		t.Fatal("Supervise did not return after its context ended")
	}
	if current == adopted || !current.StartedByUs() || current.Pid() == first.Pid() {
		t.Fatalf("Supervise returned pid %d (started by us: %v), want the new containerd", current.Pid(), current.StartedByUs())
	}
	stopManaged(t, current)
	if got := events.get(); len(got) != 2 || got[0] != ReasonContainerdExited || got[1] != ReasonContainerdRestarted {
		t.Errorf("events %v, want [%s %s]", got, ReasonContainerdExited, ReasonContainerdRestarted)
	}
}

// Supervise returns the containerd it watches, untouched, when its context
// ends: an adopted one keeps running.
func TestSuperviseStopsWatchingWithItsContext(t *testing.T) {
	root := testRoot(t)
	first := startManaged(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adopted, err := Start(ctx, Options{RootDir: root, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	superviseCtx, stopSupervising := context.WithCancel(ctx)
	result := make(chan *Managed, 1)
	go func() { result <- Supervise(superviseCtx, adopted, clock.RealClock{}, nil) }()
	stopSupervising()
	select {
	case got := <-result:
		if got != adopted {
			t.Errorf("Supervise returned another containerd (pid %d)", got.Pid())
		}
	case <-ctx.Done():
		t.Fatal("Supervise did not return after its context ended")
	}
	if !processAlive(first.Pid()) || probeCRI(ctx, first.Address(), true) != nil {
		t.Error("the adopted containerd is not running any more")
	}
}
