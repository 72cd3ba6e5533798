package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/podworker"
)

// The parts built before the pod workers reach them through the link:
// answered while the workers' component runs, and with the safe answer
// once it has stopped (the pod has a worker; an eviction fails).
func TestWorkerLink(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	link := newWorkerLink()
	workers := newPodWorkers(ctx, podworker.Deps{Clock: clocktesting.NewFakeClock(time.Now())}, link)
	done := make(chan struct{})
	go func() {
		workers.Run(ctx)
		close(done)
	}()

	if link.Has("no-such-pod") {
		t.Error("Has = true for a pod with no worker")
	}
	if err := link.Evict(ctx, "no-such-pod", 0, v1.PodStatus{}); !errors.Is(err, podworker.ErrNoPod) {
		t.Errorf("Evict = %v, want the workers' ErrNoPod", err)
	}

	cancel()
	<-done
	if !link.Has("no-such-pod") {
		t.Error("once the workers stopped, Has = false; want true (keep what the pod holds)")
	}
	if err := link.Evict(context.Background(), "no-such-pod", 0, v1.PodStatus{}); !errors.Is(err, errWorkersStopped) {
		t.Errorf("once the workers stopped, Evict = %v, want %v", err, errWorkersStopped)
	}
}
