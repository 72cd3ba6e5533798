package nodestatus

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// readyStatus is the Node's Ready condition as the API server has it, ""
// before there is one.
func readyStatus(t *testing.T, client *fake.Clientset) v1.ConditionStatus {
	node, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	if c := findCondition(node.Status.Conditions, v1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}

// waitReal waits, in real time, for cond: the updater runs in its own
// goroutine.
func waitReal(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A node that becomes ready after start-up is posted Ready within a fast
// check (100 ms), not at the next update period, as the kubelet's
// fastStatusUpdateOnce does; once ready, no more fast checks are made.
func TestUpdaterPostsReadyAtOnce(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	notReady, observed := "container runtime network not ready: waiting for the Node's spec.podCIDR", 0
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi"),
		v1.ResourcePods: resource.MustParse("110")}
	u := NewUpdater(Options{Client: client, ID: Identity{Name: "n1"}, Clock: clk, Register: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), UpdateEvery: 10 * time.Second, ReportEvery: 5 * time.Minute,
		Observe: func() Observed {
			mu.Lock()
			defer mu.Unlock()
			observed++
			return Observed{Capacity: res, Allocatable: res, NotReady: notReady}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); u.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitReal(t, "the NotReady status", func() bool { return readyStatus(t, client) == v1.ConditionFalse })
	// Observed at registration, then by the first sync: only then is the
	// updater between syncs.
	waitReal(t, "the first sync", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return observed >= 2
	})
	// Not ready: the fast checks find nothing to post.
	for range 5 {
		waitReal(t, "a fast check to wait", func() bool { return clk.Waiters() == 2 }) // and the ticker
		clk.Step(fastStatusPoll)
	}
	if got := readyStatus(t, client); got != v1.ConditionFalse {
		t.Fatalf("Ready = %q while not ready", got)
	}
	waitReal(t, "a fast check to wait", func() bool { return clk.Waiters() == 2 }) // the last one done
	mu.Lock()
	notReady = ""
	mu.Unlock()
	clk.Step(fastStatusPoll)
	waitReal(t, "the Ready status, a fast check after the node became ready", func() bool {
		return readyStatus(t, client) == v1.ConditionTrue
	})

	// Ready once: only the update period wakes the updater now.
	waitReal(t, "the updater to wait for its ticker alone", func() bool { return clk.Waiters() == 1 })
	mu.Lock()
	before := observed
	mu.Unlock()
	clk.Step(time.Second)
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if observed != before {
		t.Errorf("the node was observed %d more times after it was posted Ready, before the update period", observed-before)
	}
}
