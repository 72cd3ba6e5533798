package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// state is what one pass hands the next.
type state struct {
	// firstObservedAt are the thresholds met (or not yet resolved) and
	// since when.
	firstObservedAt []thresholdObservedAt
	// conditionsLastObservedAt is when each pressure condition was last
	// seen.
	conditionsLastObservedAt map[v1.NodeConditionType]time.Time
	// thresholdsMet are the thresholds met for their grace period that have
	// not yet satisfied their minimum reclaim.
	thresholdsMet []Threshold
	// lastObservations are the previous pass's measures.
	lastObservations observations
	// conditions are the pressure conditions the node reports.
	conditions []v1.NodeConditionType
}

// step is a pass's decision: the next state, the thresholds met now
// (ignoring grace periods) and the thresholds to act on, by eviction
// priority.
type step struct {
	next state
	met  []Threshold
	act  []Threshold
}

// advance is the pure half of a pass (the kubelet's synchronize up to the
// reclaim), over the configured thresholds, this pass's observations, the
// pressure transition period and the time.
func (s state) advance(config []Threshold, obs observations, transition time.Duration, now time.Time) step {
	met := thresholdsMet(config, obs, false)
	if len(s.thresholdsMet) > 0 {
		met = mergeThresholds(met, thresholdsMet(s.thresholdsMet, obs, true))
	}
	firstObservedAt := thresholdsFirstObservedAt(met, s.firstObservedAt, now)
	lastObservedAt := nodeConditionsLastObservedAt(nodeConditions(met), s.conditionsLastObservedAt, now)
	graceMet := thresholdsMetGracePeriod(firstObservedAt, now)
	act := thresholdsUpdatedStats(graceMet, obs, s.lastObservations)
	sortByEvictionPriority(act)
	return step{
		next: state{
			firstObservedAt:          firstObservedAt,
			conditionsLastObservedAt: lastObservedAt,
			thresholdsMet:            graceMet,
			lastObservations:         obs,
			conditions:               nodeConditionsObservedSince(lastObservedAt, transition, now),
		},
		met: met,
		act: act,
	}
}
