package podworker

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
)

func exitedAt(pod string, finished time.Time) *container.PodStatus {
	return &container.PodStatus{Containers: []container.ContainerStatus{
		{ID: "c", Name: pod, State: container.StateExited, ExitCode: 1, FinishedAt: finished},
	}}
}

// TestCrashLoopBackOff walks one crashing container through the kubelet's
// back-off: 10 s, 20 s, 40 s ... capped at 5 min, reset after 10 min of
// running.
func TestCrashLoopBackOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := NewBackOff(clk)
	pod := testPod("Always", nil, "app")
	c := &pod.Spec.Containers[0]

	if left, _ := checkBackOff(b, clk.Now(), pod, c, &container.PodStatus{}); left != 0 {
		t.Fatalf("a container that never ran must start at once, got wait %s", left)
	}
	// First crash: restart at once; the delay is now 10 s.
	if left, _ := checkBackOff(b, clk.Now(), pod, c, exitedAt("app", clk.Now())); left != 0 {
		t.Fatalf("first crash must restart at once, got wait %s", left)
	}
	for _, delay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second} {
		clk.Step(time.Second) // the container runs for 1 s, then crashes
		finished := clk.Now()
		st := exitedAt("app", finished)
		left, msg := checkBackOff(b, clk.Now(), pod, c, st)
		if left != delay {
			t.Fatalf("after a crash with delay %s: wait %s", delay, left)
		}
		if !strings.Contains(msg, "back-off "+delay.String()+" restarting failed container=app pod=web-node1_default(uid1)") {
			t.Fatalf("message %q does not read like the kubelet's", msg)
		}
		clk.Step(delay - time.Millisecond)
		if left, _ := checkBackOff(b, clk.Now(), pod, c, st); left <= 0 {
			t.Fatalf("still inside the %s window, must wait", delay)
		}
		clk.Step(time.Millisecond)
		if left, _ := checkBackOff(b, clk.Now(), pod, c, st); left != 0 {
			t.Fatalf("the %s window is over, must restart, got wait %s", delay, left)
		}
	}
	// Ten minutes of running without a crash resets the delay to 10 s.
	clk.Step(10*time.Minute + time.Second)
	st := exitedAt("app", clk.Now())
	if left, _ := checkBackOff(b, clk.Now(), pod, c, st); left != 0 {
		t.Fatalf("a crash after 10 min of running must restart at once, got wait %s", left)
	}
	clk.Step(time.Second)
	if left, _ := checkBackOff(b, clk.Now(), pod, c, exitedAt("app", clk.Now())); left != 10*time.Second {
		t.Fatalf("after a reset the delay starts at 10 s again, got %s", left)
	}
}
