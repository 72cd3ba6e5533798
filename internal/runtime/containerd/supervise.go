package containerd

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// The reasons of the node events the supervisor records.
const (
	ReasonContainerdExited        = "ContainerdExited"
	ReasonContainerdRestarted     = "ContainerdRestarted"
	ReasonContainerdRestartFailed = "ContainerdRestartFailed"
)

// RecordFunc records a node event (v1.EventTypeNormal or Warning).
type RecordFunc func(eventType, reason, message string)

// RestartObserver learns of the supervised containerd's lives: that it
// exited (before the restart's back-off) and that one runs again. Each is
// called on the supervisor's goroutine, before the node event of the same
// moment is recorded, and must not block.
type RestartObserver interface {
	RuntimeExited()
	RuntimeRestarted()
}

// Supervise keeps a containerd running on m's root until ctx ends: it
// watches m, whether berth started it or adopted it, and when it dies it
// starts a new one (or adopts one that appeared meanwhile), after the
// restart back-off, and watches that one in turn. Running containers are
// not affected (their shims outlive containerd), and CRI clients
// reconnect by themselves. It returns the containerd current when ctx
// ended, which the caller stops or leaves as Stop decides.
//
// The kubelet leaves this to systemd (containerd.service restarts
// always); berth runs its own containerd, so it does the same itself.
// Each of observers is told of every exit and restart.
func Supervise(ctx context.Context, m *Managed, clk clock.WithTicker, record RecordFunc, observers ...RestartObserver) *Managed {
	if record == nil {
		record = func(string, string, string) {}
	}
	backoff := newRestartBackoff()
	backoff.up(clk.Now())
	for {
		how, err := m.waitExit(ctx, clk)
		if err != nil {
			return m
		}
		delay := backoff.down(clk.Now())
		m.log.Error("managed containerd exited; starting it again", "pid", m.pid, "adopted", !m.startedByUs,
			"status", how, "retryIn", delay, "log", m.layout.Log)
		for _, o := range observers {
			o.RuntimeExited()
		}
		record(v1.EventTypeWarning, ReasonContainerdExited, fmt.Sprintf("containerd (pid %d, %s) %s; starting it again in %v",
			m.pid, origin(m), how, delay))
		next, ok := restart(ctx, m, clk, backoff, delay, record, observers)
		if !ok {
			return m
		}
		m = next
	}
}

// restart starts containerd after delay and again after each failure,
// until it runs (true) or ctx ends (false).
func restart(ctx context.Context, old *Managed, clk clock.WithTicker, backoff *restartBackoff, delay time.Duration,
	record RecordFunc, observers []RestartObserver) (*Managed, bool) {
	for {
		if !sleep(ctx, clk, delay) {
			return nil, false
		}
		m, err := Start(ctx, old.opts)
		if ctx.Err() != nil {
			if err == nil { // started just as berth began to stop: the caller stops it
				return m, true
			}
			return nil, false
		}
		if err == nil {
			backoff.up(clk.Now())
			old.log.Info("managed containerd is back", "pid", m.pid, "adopted", !m.startedByUs)
			for _, o := range observers {
				o.RuntimeRestarted()
			}
			record(v1.EventTypeNormal, ReasonContainerdRestarted, fmt.Sprintf("containerd is back (pid %d, %s)", m.pid, origin(m)))
			return m, true
		}
		delay = backoff.down(clk.Now())
		old.log.Error("starting managed containerd failed", "err", err, "retryIn", delay)
		// The event gets the error's first line; the log has the tail of containerd's own log too.
		first, _, _ := strings.Cut(err.Error(), "\n")
		record(v1.EventTypeWarning, ReasonContainerdRestartFailed, fmt.Sprintf("starting containerd failed, next try in %v: %s", delay, first))
	}
}

func origin(m *Managed) string {
	if m.startedByUs {
		return "started by berth"
	}
	return "adopted"
}

// sleep waits d on clk; false if ctx ends first.
func sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
