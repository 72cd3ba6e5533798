package prober

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// waitForTimer returns once the scheduler has armed its timer on clk.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the scheduler never armed its timer")
		}
		runtime.Gosched()
	}
}

type firing struct {
	name string
	due  time.Time
}

func TestSchedulerFiresInDueOrder(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	s := newScheduler(clk)
	ws := map[string]*worker{}
	for _, n := range []string{"a", "b", "c", "d"} {
		ws[n] = &worker{key: workerKey{container: n}, index: -1}
	}
	s.schedule(ws["a"], t0.Add(3*time.Second))
	s.schedule(ws["b"], t0.Add(1*time.Second))
	s.schedule(ws["c"], t0.Add(2*time.Second))
	s.schedule(ws["d"], t0.Add(2*time.Second))
	s.remove(ws["d"])
	s.advance(ws["a"], t0.Add(1500*time.Millisecond))
	s.advance(ws["c"], t0.Add(5*time.Second)) // later: ignored

	// Nothing else may wake the scheduler while the test steps the clock:
	// a wake-up between its reading the clock and arming the timer would
	// arm it from a stale now.
	<-s.wake

	fired := make(chan firing, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx, func(w *worker, due time.Time) { fired <- firing{w.key.container, due} })
	}()
	defer func() { cancel(); <-done }()

	for _, want := range []firing{
		{"b", t0.Add(time.Second)},
		{"a", t0.Add(1500 * time.Millisecond)},
		{"c", t0.Add(2 * time.Second)},
	} {
		waitForTimer(t, clk)
		select {
		case f := <-fired:
			t.Fatalf("%s fired early, at %v", f.name, clk.Now())
		default:
		}
		clk.SetTime(want.due)
		if got := <-fired; got != want {
			t.Fatalf("fired %+v, want %+v", got, want)
		}
	}
	if s.len() != 0 {
		t.Errorf("%d entries left", s.len())
	}

	// An entry scheduled while the scheduler sleeps wakes it.
	s.schedule(ws["d"], clk.Now())
	if got := <-fired; got.name != "d" {
		t.Errorf("fired %+v, want d", got)
	}
}

func TestPoolNeverMakesAnAttemptWait(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	const n = 100
	started.Add(n)
	p := newPool(4, func(*worker, time.Time) {
		started.Done()
		<-release
	})
	for range n {
		p.submit(&worker{}, t0) // would block with a fixed number of goroutines
	}
	started.Wait() // all n run at once
	close(release)

	// Afterwards at most maxIdle goroutines stay, and they are reused.
	var ran sync.WaitGroup
	ran.Add(n)
	p.run = func(*worker, time.Time) { ran.Done() }
	for range n {
		p.submit(&worker{}, t0)
	}
	ran.Wait()
	p.stop()
	if idle := p.idle.Load(); idle != 0 {
		t.Errorf("%d goroutines still idle after the pool stopped", idle)
	}
}

func TestUpdatesCoalesceAndNeverBlock(t *testing.T) {
	q := newUpdateQueue()
	// Far more than the channel holds, with nobody reading: push must not
	// block, and nothing may be lost.
	const n = 3 * updatesBuffer
	for i := range n {
		q.push(Update{ContainerID: fmt.Sprint(i), Type: Readiness, Result: Failure})
	}
	q.push(Update{ContainerID: "0", Type: Readiness, Result: Success}) // supersedes the pending Failure
	q.push(Update{ContainerID: "0", Type: Liveness, Result: Failure})  // another result of the same container

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.pump(ctx) }()
	defer func() { cancel(); <-done }()

	first := <-q.out
	if first != (Update{ContainerID: "0", Type: Readiness, Result: Success}) {
		t.Errorf("first update %+v, want the latest readiness of 0 in its first place", first)
	}
	for i := 1; i < n; i++ {
		if u := <-q.out; u.ContainerID != fmt.Sprint(i) {
			t.Fatalf("update %d is %+v", i, u)
		}
	}
	if u := <-q.out; u != (Update{ContainerID: "0", Type: Liveness, Result: Failure}) {
		t.Errorf("last update %+v", u)
	}
}

func TestRunProbesConcurrently(t *testing.T) {
	h := newHarness(t)
	h.runner.called = make(chan string, 100)
	h.runner.block = map[string]chan struct{}{"slow/readiness": make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	h.statuses.set("u1", runningStatus(start, "slow", "c1"))
	h.statuses.set("u2", runningStatus(start, "fast", "c2"))
	h.m.AddPod(pod("u1", container("slow", nil, spec(1, 1, 3, 0), nil)))
	if got := <-h.runner.called; got != "slow/readiness" {
		t.Fatalf("first call %s", got)
	}
	// The slow probe hangs; another pod's probe still runs.
	h.m.AddPod(pod("u2", container("fast", nil, spec(1, 1, 3, 0), nil)))
	if got := <-h.runner.called; got != "fast/readiness" {
		t.Fatalf("second call %s", got)
	}
	for u := range h.m.Updates() {
		if u.ContainerID == "c2" && u.Result == Success {
			break
		}
	}
	h.wantReady("c2", true)
	h.wantReady("c1", false)
}
