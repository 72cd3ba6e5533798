package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/podworker"
)

// fakeVictims fails each Evict with the next error of fails, then succeeds.
type fakeVictims struct {
	mu     sync.Mutex
	fails  []error
	calls  int
	graces []int64
	status v1.PodStatus
	has    bool
}

func (f *fakeVictims) Evict(_ context.Context, _ types.UID, grace int64, st v1.PodStatus) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.graces = append(f.graces, grace)
	f.status = st
	if len(f.fails) > 0 {
		err := f.fails[0]
		f.fails = f.fails[1:]
		return err
	}
	return nil
}

func (f *fakeVictims) Has(types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.has
}

type recordedEvents struct {
	mu   sync.Mutex
	list []string
}

func (r *recordedEvents) Event(_ *v1.Pod, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, eventType+" "+reason+": "+message)
}

func TestKillVictimRetriesUntilTheVictimStops(t *testing.T) {
	victim := pod("bu2", "2")
	victim.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7)
	workers := &fakeVictims{fails: []error{
		fmt.Errorf("evicting pod 2: %w", context.DeadlineExceeded),
		errors.New("stop container: runtime unavailable"),
	}}
	events := &recordedEvents{}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	k := victimKiller{workers: workers, clk: clk, events: events, log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	done := make(chan struct{})
	go func() {
		defer close(done)
		k.kill(context.Background(), victim)
	}()
	// Each failure waits retryKillVictim on the clock before trying again.
	for range 2 {
		for !clk.HasWaiters() {
			select {
			case <-done:
				t.Fatal("kill returned while the victim still ran")
			case <-time.After(time.Millisecond):
			}
		}
		clk.Step(retryKillVictim)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("kill did not return once the victim stopped")
	}
	if workers.calls != 3 {
		t.Errorf("%d kills, want 3: two failures, then success", workers.calls)
	}
	for _, g := range workers.graces {
		if g != 7 {
			t.Errorf("grace %d, want the pod's own 7 s", g)
		}
	}
	st := workers.status
	if st.Phase != v1.PodFailed || st.Reason != "Preempting" || st.Message != "Preempted in order to admit critical pod" ||
		len(st.Conditions) != 1 || st.Conditions[0].Type != v1.DisruptionTarget || st.Conditions[0].Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("status %+v, want the kubelet's preempted status", st)
	}
	want := []string{
		"Warning Preempting: Preempted in order to admit critical pod",
		"Warning FailedKillPod: error killing pod: evicting pod 2: context deadline exceeded (attempt 1); retrying",
		"Warning FailedKillPod: error killing pod: stop container: runtime unavailable (attempt 2); retrying",
	}
	if fmt.Sprint(events.list) != fmt.Sprint(want) {
		t.Errorf("events\n%q\nwant\n%q", events.list, want)
	}
}

func TestKillVictimThatIsGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		has  bool
	}{
		{"no such pod", fmt.Errorf("pod 2: %w", podworker.ErrNoPod), false},
		{"deleted, and its worker has finished", fmt.Errorf("pod 2: %w", podworker.ErrPodDeleted), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			workers := &fakeVictims{fails: []error{tc.err}, has: tc.has}
			k := victimKiller{workers: workers, clk: clocktesting.NewFakeClock(time.Unix(0, 0)), events: &recordedEvents{},
				log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			k.kill(context.Background(), pod("gone", "2"))
			if workers.calls != 1 {
				t.Errorf("%d kills, want 1: a pod that is gone frees what it held", workers.calls)
			}
		})
	}
}

func TestKillTimeout(t *testing.T) {
	for grace, want := range map[int64]time.Duration{0: 10 * time.Second, 2: 10 * time.Second, 30: 45 * time.Second} {
		if got := killTimeout(grace); got != want {
			t.Errorf("killTimeout(%d) = %s, want %s", grace, got, want)
		}
	}
}
