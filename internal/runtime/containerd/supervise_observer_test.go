package containerd

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// observed records the observer's calls and the node events in one
// sequence.
type observed struct{ recorded }

func (o *observed) RuntimeExited()    { o.record("", "observer:exited", "") }
func (o *observed) RuntimeRestarted() { o.record("", "observer:restarted", "") }

// The supervisor tells its restart observers of an exit and of the
// restart, each before the node event of the same moment (the network GC
// reads its state while containerd is down, and collects once it is back).
func TestSuperviseTellsRestartObservers(t *testing.T) {
	root := testRoot(t)
	first := startManaged(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	superviseCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising()
	var seen observed
	result := make(chan *Managed, 1)
	go func() { result <- Supervise(superviseCtx, first, clock.RealClock{}, seen.record, &seen) }()

	if err := syscall.Kill(first.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	want := []string{"observer:exited", ReasonContainerdExited, "observer:restarted", ReasonContainerdRestarted}
	for !slices.Contains(seen.get(), ReasonContainerdRestarted) {
		if ctx.Err() != nil {
			t.Fatalf("no restart: seen %v", seen.get())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := seen.get(); !slices.Equal(got, want) {
		t.Errorf("seen %v, want %v", got, want)
	}
	// The new containerd answers before its event is recorded; let it
	// settle as the other tests do before stopping it.
	if err := probeCRI(ctx, first.Address(), true); err != nil {
		t.Fatal(err)
	}
	stopSupervising()
	select {
	case current := <-result:
		stopManaged(t, current)
	case <-ctx.Done():
		t.Fatal("Supervise did not return after its context ended")
	}
}
