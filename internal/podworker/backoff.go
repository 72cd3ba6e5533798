package podworker

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/container"
)

// The kubelet's crash-loop back-off: 10 s, doubling to 5 min; an entry
// expires (and the delay resets) after twice the maximum, 10 min, without a
// restart.
const (
	BackOffInitial = 10 * time.Second
	BackOffMax     = 5 * time.Minute
)

// NewBackOff returns the crash-loop back-off on clk. (client-go names the
// constructor that takes a clock "Fake"; it is the only one that does.)
func NewBackOff(clk clock.Clock) *flowcontrol.Backoff {
	return flowcontrol.NewFakeBackOffWithJitter(BackOffInitial, BackOffMax, clk, 0)
}

func backOffKey(pod *v1.Pod, c *v1.Container) string {
	return fmt.Sprintf("%s_%s_%s_%s", pod.Namespace, pod.Name, pod.UID, c.Name)
}

// checkBackOff decides whether the container may be started now. When it
// may not, it returns the time left and the kubelet's message. When it may,
// it records the restart, which doubles the next delay.
func checkBackOff(b *flowcontrol.Backoff, now time.Time, pod *v1.Pod, c *v1.Container, st *container.PodStatus) (time.Duration, string) {
	var last *container.ContainerStatus
	for _, cs := range st.FindContainers(c.Name) {
		if cs.State == container.StateExited {
			last = cs
			break
		}
	}
	if last == nil {
		return 0, ""
	}
	key := backOffKey(pod, c)
	if b.IsInBackOffSince(key, last.FinishedAt) {
		delay := b.Get(key)
		left := delay - now.Sub(last.FinishedAt)
		return left, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
			delay, c.Name, pod.Name, pod.Namespace, pod.UID)
	}
	b.Next(key, last.FinishedAt)
	return 0, ""
}
