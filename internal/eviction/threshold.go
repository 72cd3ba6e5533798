package eviction

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ThresholdValue is a quantity, or a fraction of the signal's capacity.
type ThresholdValue struct {
	// Quantity, when set, is the value; bytes, inodes or process IDs.
	Quantity *resource.Quantity
	// Percentage is the value as a fraction of capacity (0.1 for "10%")
	// when Quantity is nil. The kubelet keeps it as a float32; so does
	// berth, so that both resolve the same number of bytes.
	Percentage float32
}

// quantity resolves v against capacity (the kubelet's GetThresholdQuantity).
func (v ThresholdValue) quantity(capacity *resource.Quantity) *resource.Quantity {
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		return &q
	}
	return resource.NewQuantity(int64(float64(capacity.Value())*float64(v.Percentage)), resource.BinarySI)
}

// String is the value as configured: "100Mi" or "10%".
func (v ThresholdValue) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	// Six significant digits undo the float32's rounding: 15% is stored as
	// 0.15000001.
	return strconv.FormatFloat(float64(v.Percentage)*100, 'g', 6, 64) + "%"
}

func (v ThresholdValue) equal(o ThresholdValue) bool {
	if v.Quantity != nil || o.Quantity != nil {
		return v.Quantity != nil && o.Quantity != nil && v.Quantity.Cmp(*o.Quantity) == 0
	}
	return v.Percentage == o.Percentage
}

// Threshold is one eviction threshold (the kubelet's evictionapi.Threshold).
type Threshold struct {
	Signal   Signal
	Operator ThresholdOperator
	Value    ThresholdValue
	// GracePeriod is how long the threshold must hold before pods are
	// evicted: zero for a hard threshold (evictionHard), the configured
	// evictionSoftGracePeriod for a soft one.
	GracePeriod time.Duration
	// MinReclaim, when set, is how far past the threshold an eviction must
	// bring the signal before the threshold counts as resolved.
	MinReclaim *ThresholdValue
}

// IsHard reports a threshold acted on as soon as it is met: pods evicted for
// it get immediateEvictionGracePeriodSeconds.
func (t Threshold) IsHard() bool { return t.GracePeriod == 0 }

// String is the threshold as the kubelet's flags spell it, e.g.
// "memory.available<100Mi" or "nodefs.available<15% for 1m30s".
func (t Threshold) String() string {
	s := fmt.Sprintf("%s<%s", t.Signal, t.Value)
	if !t.IsHard() {
		s += " for " + t.GracePeriod.String()
	}
	return s
}

// same reports the same threshold, the way the kubelet's hasThreshold tells:
// minimum reclaim does not count.
func (t Threshold) same(o Threshold) bool {
	return t.Signal == o.Signal && t.Operator == o.Operator && t.GracePeriod == o.GracePeriod && t.Value.equal(o.Value)
}

// WithAllocatableThresholds adds, for every hard memory.available
// threshold, the same threshold on allocatableMemory.available, as the
// kubelet does when enforceNodeAllocatable includes "pods": pods are evicted
// before they use memory reserved for the system. A hard threshold already
// on allocatableMemory.available is kept instead.
func WithAllocatableThresholds(thresholds []Threshold) []Threshold {
	out := append([]Threshold(nil), thresholds...)
	for _, t := range thresholds {
		if t.Signal == SignalAllocatableMemoryAvailable && t.IsHard() {
			return out
		}
	}
	for _, t := range thresholds {
		if t.Signal != SignalMemoryAvailable || !t.IsHard() {
			continue
		}
		out = append(out, Threshold{
			Signal:     SignalAllocatableMemoryAvailable,
			Operator:   t.Operator,
			Value:      t.Value,
			MinReclaim: t.MinReclaim,
		})
	}
	return out
}
