package eviction

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Status is the eviction manager as `berth describe node` shows it.
type Status struct {
	// LastSync is when the last pass observed the node; absent before the
	// first.
	LastSync time.Time `json:"lastSync,omitzero"`
	// Error says why the last pass could not observe the node.
	Error string `json:"error,omitempty"`
	// Pressure are the pressure conditions the node reports.
	Pressure []v1.NodeConditionType `json:"pressure,omitempty"`
	// Thresholds are the configured thresholds, by eviction priority.
	Thresholds []ThresholdStatus `json:"thresholds"`
	// LastEviction is the last pod evicted, if any.
	LastEviction *Eviction `json:"lastEviction,omitempty"`
}

// ThresholdStatus is one threshold and what the last pass saw of it.
type ThresholdStatus struct {
	Signal Signal `json:"signal"`
	// Value is the threshold as configured: "100Mi" or "10%".
	Value string `json:"value"`
	// GracePeriod is zero for a hard threshold.
	GracePeriod metav1.Duration `json:"gracePeriod"`
	MinReclaim  string          `json:"minReclaim,omitempty"`
	// Quantity is Value resolved against the capacity observed; Available
	// and Capacity are what was observed. All three are absent when the
	// signal was not observed.
	Quantity  string `json:"quantity,omitempty"`
	Available string `json:"available,omitempty"`
	Capacity  string `json:"capacity,omitempty"`
	// Met says the signal is below the threshold, or not yet its minimum
	// reclaim past it after an eviction.
	Met bool `json:"met"`
	// MetSince is when the threshold was first seen met.
	MetSince time.Time `json:"metSince,omitzero"`
	// Enforced says the threshold has been met for its grace period: pods
	// are evicted for it.
	Enforced bool `json:"enforced"`
}

// Eviction is one pod the manager evicted.
type Eviction struct {
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Signal    Signal    `json:"signal"`
	// Resource is the starved resource: memory, ephemeral-storage, inodes
	// or pids.
	Resource           v1.ResourceName   `json:"resource"`
	GracePeriodSeconds int64             `json:"gracePeriodSeconds"`
	Message            string            `json:"message"`
	Annotations        map[string]string `json:"annotations,omitempty"`
	// Error says why stopping the pod failed, if it did.
	Error string `json:"error,omitempty"`
}

func (e *Eviction) deepCopy() *Eviction {
	if e == nil {
		return nil
	}
	c := *e
	c.Annotations = maps.Clone(e.Annotations)
	return &c
}

// thresholdStatuses describes config against the last pass: its
// observations, the thresholds it found met and the state it left.
func thresholdStatuses(config []Threshold, obs observations, met []Threshold, st state) []ThresholdStatus {
	sorted := slices.Clone(config)
	sortByEvictionPriority(sorted)
	out := make([]ThresholdStatus, 0, len(sorted))
	for _, t := range sorted {
		s := ThresholdStatus{
			Signal:      t.Signal,
			Value:       t.Value.String(),
			GracePeriod: metav1.Duration{Duration: t.GracePeriod},
			Met:         hasThreshold(met, t),
			Enforced:    hasThreshold(st.thresholdsMet, t),
		}
		if t.MinReclaim != nil {
			s.MinReclaim = t.MinReclaim.String()
		}
		if o, ok := obs[t.Signal]; ok {
			s.Quantity = t.Value.quantity(o.capacity).String()
			s.Available = o.available.String()
			s.Capacity = o.capacity.String()
		}
		for _, f := range st.firstObservedAt {
			if f.threshold.same(t) {
				s.MetSince = f.at
				break
			}
		}
		out = append(out, s)
	}
	return out
}
