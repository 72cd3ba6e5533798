package eviction

import (
	"cmp"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// thresholdsMet returns the thresholds whose signal is observed below them.
// With enforceMinReclaim, a threshold also counts as met until the signal is
// its minimum reclaim past it: an eviction is not done until it has freed
// that much. Thresholds on signals not observed are skipped.
func thresholdsMet(thresholds []Threshold, obs observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.quantity(o.capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q.Add(*t.MinReclaim.quantity(o.capacity))
		}
		if t.Operator == OpLessThan && q.Cmp(*o.available) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// mergeThresholds appends to a the thresholds of b it does not have.
func mergeThresholds(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !hasThreshold(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func hasThreshold(list []Threshold, t Threshold) bool {
	return slices.ContainsFunc(list, t.same)
}

// thresholdObservedAt is when a threshold was first seen met in the current
// run of passes that met it.
type thresholdObservedAt struct {
	threshold Threshold
	at        time.Time
}

// thresholdsFirstObservedAt keeps the first-observed time of the thresholds
// still met and starts the clock at now for the new ones; thresholds no
// longer met are forgotten, so their grace period starts over.
func thresholdsFirstObservedAt(thresholds []Threshold, last []thresholdObservedAt, now time.Time) []thresholdObservedAt {
	out := make([]thresholdObservedAt, 0, len(thresholds))
	for _, t := range thresholds {
		at := now
		for _, l := range last {
			if l.threshold.same(t) {
				at = l.at
				break
			}
		}
		out = append(out, thresholdObservedAt{threshold: t, at: at})
	}
	return out
}

// thresholdsMetGracePeriod returns the thresholds met for at least their
// grace period (at once for hard thresholds).
func thresholdsMetGracePeriod(observedAt []thresholdObservedAt, now time.Time) []Threshold {
	var out []Threshold
	for _, o := range observedAt {
		if now.Sub(o.at) >= o.threshold.GracePeriod {
			out = append(out, o.threshold)
		}
	}
	return out
}

// conditionTypes are the pressure conditions, in the order berth reports
// them.
func conditionTypes() []v1.NodeConditionType {
	return []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
}

// nodeConditions returns the conditions the thresholds report, each once.
func nodeConditions(thresholds []Threshold) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, c := range conditionTypes() {
		for _, t := range thresholds {
			if tc, ok := nodeCondition(t.Signal); ok && tc == c {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// nodeConditionsLastObservedAt records now for the conditions observed and
// keeps the previous times of the others.
func nodeConditionsLastObservedAt(conditions []v1.NodeConditionType, last map[v1.NodeConditionType]time.Time, now time.Time) map[v1.NodeConditionType]time.Time {
	out := make(map[v1.NodeConditionType]time.Time, len(last)+len(conditions))
	for c, at := range last {
		out[c] = at
	}
	for _, c := range conditions {
		out[c] = now
	}
	return out
}

// nodeConditionsObservedSince returns the conditions last observed less than
// period ago: a condition stays until the signal has been clear for the
// whole transition period, so that the node does not flap in and out of
// pressure.
func nodeConditionsObservedSince(observedAt map[v1.NodeConditionType]time.Time, period time.Duration, now time.Time) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, c := range conditionTypes() {
		if at, ok := observedAt[c]; ok && now.Sub(at) < period {
			out = append(out, c)
		}
	}
	return out
}

// thresholdsUpdatedStats keeps the thresholds whose signal was measured
// after the previous pass's measure (or at an unknown time): stats that have
// not changed since the last eviction do not yet show what it freed.
func thresholdsUpdatedStats(thresholds []Threshold, obs, last observations) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		l, seen := last[t.Signal]
		if !seen || o.time.IsZero() || o.time.After(l.time) {
			out = append(out, t)
		}
	}
	return out
}

// sortByEvictionPriority orders thresholds as they are handled: memory
// first, then disk, then PIDs (the order of Signals), and for one signal the
// hard threshold before the soft one.
func sortByEvictionPriority(thresholds []Threshold) {
	slices.SortStableFunc(thresholds, func(a, b Threshold) int {
		return cmp.Or(
			cmp.Compare(signalRank(a.Signal), signalRank(b.Signal)),
			cmp.Compare(a.GracePeriod, b.GracePeriod),
		)
	})
}

// reclaimableThreshold returns the first threshold with a resource to
// reclaim, and that resource.
func reclaimableThreshold(thresholds []Threshold) (Threshold, v1.ResourceName, bool) {
	for _, t := range thresholds {
		if r, ok := starvedResource(t.Signal); ok {
			return t, r, true
		}
	}
	return Threshold{}, "", false
}
