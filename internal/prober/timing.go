package prober

import (
	"hash/fnv"
	"time"
)

// When probes run. Every probe of a container sits on a grid anchored at
// the container's start: startedAt + initialDelay + phase + k*period, where
// phase is a hash of the container ID. The grid depends only on the container,
// so probes with the same period are spread across the period instead of
// firing together, and a restarted berth keeps probing on the same beat.

// phase is the container's offset within its period.
func phase(containerID string, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(containerID))
	return time.Duration(h.Sum64() % uint64(period))
}

// slotAtOrAfter is the first grid point anchor + k*period (k >= 0) not
// before t.
func slotAtOrAfter(anchor time.Time, period time.Duration, t time.Time) time.Time {
	if !t.After(anchor) || period <= 0 {
		return anchor
	}
	k := (t.Sub(anchor) + period - 1) / period
	return anchor.Add(k * period)
}

// probeDue is the earliest time the next probe of s.containerID may run.
//
//   - The first probe of a container runs as soon as initialDelaySeconds has
//     passed since it started, with no random wait.
//   - Except for containers that were already running when this manager
//     started (berth restarted): those join their grid, so a restart does
//     not fire every probe at once.
//   - Later probes take the next grid point at least half a period after the
//     previous probe: never two probes in a row, never drift.
func probeDue(cfg probeConfig, s probeState, o observation) time.Time {
	base := o.startedAt.Add(cfg.initialDelay)
	grid := base.Add(phase(s.containerID, cfg.period))
	if s.lastProbe.IsZero() {
		// Published start times are truncated to the second: compare at
		// that precision, so a container started in this manager's first
		// second still counts as new.
		if o.startedAt.Before(o.agentStart.Truncate(time.Second)) {
			return slotAtOrAfter(grid, cfg.period, later(base, o.agentStart))
		}
		return base
	}
	return slotAtOrAfter(grid, cfg.period, s.lastProbe.Add(cfg.period/2))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
