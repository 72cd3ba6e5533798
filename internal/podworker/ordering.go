package podworker

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// terminationOrder makes a pod's sidecars stop after its app containers,
// and each sidecar after the sidecars that follow it in the spec, while
// every other container stops at once: the kubelet's terminationOrdering
// (KEP-753). Each container's preStop hook still runs at once; only the
// stop signal waits, and never longer than the container's grace period.
type terminationOrder struct {
	clock   clock.Clock
	prereqs map[string][]chan struct{}

	mu   sync.Mutex
	done map[string]chan struct{}
}

// newTerminationOrder orders the stop of the running containers named; a
// container that is not running is taken as stopped already. It returns nil
// (no ordering) for a pod without sidecars or an unknown pod.
func newTerminationOrder(clk clock.Clock, pod *v1.Pod, running []string) *terminationOrder {
	if pod == nil || !hasSidecar(pod) {
		return nil
	}
	o := &terminationOrder{clock: clk, prereqs: map[string][]chan struct{}{}, done: map[string]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, n := range running {
		isRunning[n] = true
	}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning[name] {
			close(ch) // nothing to wait for
		}
		o.done[name] = ch
		return ch
	}
	var apps []chan struct{}
	for i := range pod.Spec.Containers {
		apps = append(apps, channel(pod.Spec.Containers[i].Name))
	}
	var later chan struct{} // the next sidecar in the spec
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := channel(c.Name)
		if !isSidecar(c) {
			continue
		}
		o.prereqs[c.Name] = append(o.prereqs[c.Name], apps...)
		if later != nil {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], later)
		}
		later = ch
	}
	return o
}

// waitForTurn blocks until every container name must outlive has stopped,
// or grace seconds passed, and returns the whole seconds it waited.
func (o *terminationOrder) waitForTurn(name string, grace int64) int64 {
	if o == nil || grace <= 0 || len(o.prereqs[name]) == 0 {
		return 0
	}
	start := o.clock.Now()
	timeout := o.clock.NewTimer(time.Duration(grace) * time.Second)
	defer timeout.Stop()
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-timeout.C():
			return int64(o.clock.Since(start) / time.Second)
		}
	}
	return int64(o.clock.Since(start) / time.Second)
}

// stopped records that name has stopped (or failed to), releasing the
// containers that wait for it. It may be called more than once.
func (o *terminationOrder) stopped(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.done[name]; ok {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

func hasSidecar(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}
