package containerd

import "time"

// restartBackoff decides how long the supervisor waits before it starts a
// dead containerd again. It is a plain state machine over the times of
// what happened; the supervisor tells it, and sleeps what it says.
//
// The first death of a containerd that had been running for a while is
// answered at once: the node has no runtime until it is back. Deaths that
// follow quickly (a containerd that dies again soon after it started, or a
// start that fails) wait Initial, then twice as long each time up to Max,
// so a containerd that cannot run does not spin. A containerd that stayed
// up for StableAfter starts the count afresh, as the kubelet's back-off
// forgets an entry after twice its maximum.
type restartBackoff struct {
	initial, max, stableAfter time.Duration

	failures int       // quick deaths and failed starts in a row
	upSince  time.Time // when the running containerd came up; zero while it is down
}

const (
	restartInitialDelay = time.Second
	restartMaxDelay     = 30 * time.Second
)

func newRestartBackoff() *restartBackoff {
	return &restartBackoff{initial: restartInitialDelay, max: restartMaxDelay, stableAfter: 2 * restartMaxDelay}
}

// up records that a containerd was started or adopted at now.
func (b *restartBackoff) up(now time.Time) { b.upSince = now }

// down records that the containerd died, or a start failed, at now, and
// returns how long to wait before the next start.
func (b *restartBackoff) down(now time.Time) time.Duration {
	if !b.upSince.IsZero() && now.Sub(b.upSince) >= b.stableAfter {
		b.failures = 0
	}
	b.upSince = time.Time{}
	delay := time.Duration(0)
	if b.failures > 0 {
		delay = b.initial
		for i := 1; i < b.failures && delay < b.max; i++ {
			delay *= 2
		}
		delay = min(delay, b.max)
	}
	b.failures++
	return delay
}
