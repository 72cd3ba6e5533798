package podworker

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// waitAsync runs waitForTurn in a goroutine and delivers what it returned.
func waitAsync(o *terminationOrder, name string, grace int64) chan int64 {
	out := make(chan int64, 1)
	go func() { out <- o.waitForTurn(name, grace) }()
	return out
}

// returned reports whether the wait has returned, leaving its value there.
func returned(ch chan int64) bool {
	select {
	case v := <-ch:
		ch <- v
		return true
	default:
		return false
	}
}

func TestTerminationOrderSidecarsLastInReverse(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	pod := withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "i1", "s2"}, "a", "b"), "s1", "s2")
	o := newTerminationOrder(clk, pod, []string{"a", "b", "s1", "s2"})

	for _, app := range []string{"a", "b", "i1"} {
		if got := o.waitForTurn(app, 30); got != 0 {
			t.Errorf("%s waited %d s; app and regular init containers stop at once", app, got)
		}
	}
	s1 := waitAsync(o, "s1", 30)
	s2 := waitAsync(o, "s2", 30)
	o.stopped("a")
	if returned(s1) || returned(s2) {
		t.Fatal("a sidecar's turn came while an app container still ran")
	}
	o.stopped("b")
	select {
	case <-s2:
	case <-time.After(5 * time.Second):
		t.Fatal("s2, the last sidecar, did not get its turn once the app containers stopped")
	}
	if returned(s1) {
		t.Fatal("s1 got its turn before s2, the sidecar after it, stopped")
	}
	o.stopped("s2")
	o.stopped("s2") // twice is harmless
	select {
	case <-s1:
	case <-time.After(5 * time.Second):
		t.Fatal("s1 did not get its turn once s2 stopped")
	}
}

func TestTerminationOrderGraceBoundsTheWait(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	pod := withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1"}, "a"), "s1")
	o := newTerminationOrder(clk, pod, []string{"a", "s1"})
	s1 := waitAsync(o, "s1", 10)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(10 * time.Second)
	select {
	case got := <-s1:
		if got != 10 {
			t.Errorf("waited %d s, want the whole grace period of 10 s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait outlived the grace period")
	}
}

func TestTerminationOrderNotRunningIsStopped(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	pod := withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "s2"}, "a"), "s1", "s2")
	// The app container and s2 have exited already: s1 goes at once.
	o := newTerminationOrder(clk, pod, []string{"s1"})
	if got := o.waitForTurn("s1", 30); got != 0 {
		t.Errorf("s1 waited %d s for containers that were not running", got)
	}
	if o := newTerminationOrder(clk, testPod(v1.RestartPolicyAlways, []string{"i1"}, "a"), []string{"a"}); o != nil {
		t.Error("a pod without sidecars needs no ordering")
	}
	var none *terminationOrder
	if none.waitForTurn("a", 30) != 0 {
		t.Error("no ordering waits for nothing")
	}
	none.stopped("a")
}
