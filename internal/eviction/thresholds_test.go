package eviction

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// memoryObs observes memory.available out of 10Gi at time at.
func memoryObs(available string, at time.Time) observations {
	return observations{SignalMemoryAvailable: {available: quantity(available), capacity: quantity("10Gi"), time: at}}
}

func TestThresholdsMet(t *testing.T) {
	hard := threshold(t, SignalMemoryAvailable, "1Gi", 0)
	percent := threshold(t, SignalMemoryAvailable, "10%", time.Minute) // 1Gi of 10Gi
	reclaim := withMinReclaim(threshold(t, SignalMemoryAvailable, "1Gi", 0), "500Mi")
	reclaimPercent := withMinReclaim(threshold(t, SignalMemoryAvailable, "1Gi", 0), "5%")
	disk := threshold(t, SignalNodeFsAvailable, "1Gi", 0)
	for _, tc := range []struct {
		name       string
		thresholds []Threshold
		available  string
		enforce    bool
		want       string
	}{
		{"below a quantity", []Threshold{hard}, "900Mi", false, hard.String()},
		{"at the threshold is not below it", []Threshold{hard}, "1Gi", false, ""},
		{"above", []Threshold{hard}, "2Gi", false, ""},
		{"below a percentage of capacity", []Threshold{percent}, "1023Mi", false, percent.String()},
		// The fraction is a float32, as in the kubelet: 10% of 10Gi resolves
		// to 1073741840 bytes, 16 more than 1Gi.
		{"just below a percentage of capacity", []Threshold{percent}, "1Gi", false, percent.String()},
		{"at a percentage of capacity", []Threshold{percent}, "1073741840", false, ""},
		{"minimum reclaim ignored when not enforced", []Threshold{reclaim}, "1200Mi", false, ""},
		{"minimum reclaim enforced: not yet 500Mi past", []Threshold{reclaim}, "1200Mi", true, describe([]Threshold{reclaim})},
		{"minimum reclaim enforced: far enough past", []Threshold{reclaim}, "1524Mi", true, ""},
		// 5% of 10Gi is 536870920 bytes.
		{"minimum reclaim as a percentage", []Threshold{reclaimPercent}, "1610612743", true, describe([]Threshold{reclaimPercent})},
		{"minimum reclaim as a percentage, satisfied", []Threshold{reclaimPercent}, "1610612744", true, ""},
		{"thresholds on signals not observed are skipped", []Threshold{disk, hard}, "100Mi", false, hard.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := thresholdsMet(tc.thresholds, memoryObs(tc.available, t0), tc.enforce)
			if d := describe(got); d != tc.want {
				t.Errorf("met %q, want %q", d, tc.want)
			}
		})
	}
}

func TestMergeThresholds(t *testing.T) {
	a := threshold(t, SignalMemoryAvailable, "1Gi", 0)
	aAgain := withMinReclaim(threshold(t, SignalMemoryAvailable, "1024Mi", 0), "1Mi") // same: min reclaim does not count
	soft := threshold(t, SignalMemoryAvailable, "1Gi", time.Minute)
	b := threshold(t, SignalNodeFsAvailable, "10%", 0)
	got := mergeThresholds([]Threshold{a}, []Threshold{aAgain, soft, b})
	if d, want := describe(got), "memory.available<1Gi; memory.available<1Gi for 1m0s; nodefs.available<10%"; d != want {
		t.Errorf("merged %s, want %s", d, want)
	}
}

func TestGracePeriods(t *testing.T) {
	hard := threshold(t, SignalMemoryAvailable, "1Gi", 0)
	soft := threshold(t, SignalMemoryAvailable, "2Gi", time.Minute)
	disk := threshold(t, SignalNodeFsAvailable, "10%", 30*time.Second)

	// First seen at t0: both start their clock.
	at := thresholdsFirstObservedAt([]Threshold{hard, soft}, nil, t0)
	// Ten seconds later the soft one is still met, the disk one is new and
	// the hard one cleared: its clock is forgotten.
	at = thresholdsFirstObservedAt([]Threshold{soft, disk}, at, t0.Add(10*time.Second))
	if len(at) != 2 || !at[0].at.Equal(t0) || !at[1].at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("first observed at = %+v", at)
	}
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{
		{39 * time.Second, ""},
		{40 * time.Second, disk.String()},
		{59 * time.Second, disk.String()},
		{time.Minute, soft.String() + "; " + disk.String()},
	} {
		if got := describe(thresholdsMetGracePeriod(at, t0.Add(tc.after))); got != tc.want {
			t.Errorf("after %v: %q, want %q", tc.after, got, tc.want)
		}
	}
	// A hard threshold needs no time.
	if got := thresholdsMetGracePeriod(thresholdsFirstObservedAt([]Threshold{hard}, nil, t0), t0); len(got) != 1 {
		t.Errorf("hard threshold at once: %s", describe(got))
	}
}

func TestNodeConditions(t *testing.T) {
	got := nodeConditions([]Threshold{
		threshold(t, SignalPIDAvailable, "100", 0),
		threshold(t, SignalImageFsInodesFree, "5%", 0),
		threshold(t, SignalNodeFsAvailable, "10%", 0),
		threshold(t, SignalAllocatableMemoryAvailable, "1Gi", 0),
	})
	want := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
	if !slices.Equal(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}
	if got := nodeConditions(nil); got != nil {
		t.Errorf("no thresholds: %v", got)
	}
}

func TestPressureTransitionPeriod(t *testing.T) {
	const period = 5 * time.Minute
	seen := nodeConditionsLastObservedAt([]v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure}, nil, t0)
	// Disk seen again a minute later; memory not.
	seen = nodeConditionsLastObservedAt([]v1.NodeConditionType{v1.NodeDiskPressure}, seen, t0.Add(time.Minute))
	for _, tc := range []struct {
		after time.Duration
		want  []v1.NodeConditionType
	}{
		{0, []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure}},
		{period - time.Nanosecond, []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure}},
		{period, []v1.NodeConditionType{v1.NodeDiskPressure}},
		{period + time.Minute - time.Nanosecond, []v1.NodeConditionType{v1.NodeDiskPressure}},
		{period + time.Minute, nil},
	} {
		got := nodeConditionsObservedSince(seen, period, t0.Add(tc.after))
		if !slices.Equal(got, tc.want) {
			t.Errorf("after %v: %v, want %v", tc.after, got, tc.want)
		}
	}
}

func TestThresholdsUpdatedStats(t *testing.T) {
	mem := threshold(t, SignalMemoryAvailable, "1Gi", 0)
	disk := threshold(t, SignalNodeFsAvailable, "1Gi", 0)
	for _, tc := range []struct {
		name      string
		now, last observations
		want      string
	}{
		{"first pass", memoryObs("1Mi", t0), nil, mem.String()},
		{"newer stats", memoryObs("1Mi", t0.Add(time.Second)), memoryObs("1Mi", t0), mem.String()},
		{"the same stats again", memoryObs("1Mi", t0), memoryObs("1Mi", t0), ""},
		{"older stats", memoryObs("1Mi", t0), memoryObs("1Mi", t0.Add(time.Second)), ""},
		{"time unknown", memoryObs("1Mi", time.Time{}), memoryObs("1Mi", time.Time{}), mem.String()},
	} {
		got := thresholdsUpdatedStats([]Threshold{mem, disk}, tc.now, tc.last)
		if d := describe(got); d != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, d, tc.want)
		}
	}
}

func TestSortByEvictionPriority(t *testing.T) {
	ts := []Threshold{
		threshold(t, SignalPIDAvailable, "100", 0),
		threshold(t, SignalNodeFsAvailable, "20%", time.Minute),
		threshold(t, SignalMemoryAvailable, "2Gi", time.Minute),
		threshold(t, SignalImageFsAvailable, "15%", 0),
		threshold(t, SignalNodeFsAvailable, "10%", 0),
		threshold(t, SignalAllocatableMemoryAvailable, "1Gi", 0),
		threshold(t, SignalMemoryAvailable, "1Gi", 0),
	}
	sortByEvictionPriority(ts)
	want := "memory.available<1Gi; memory.available<2Gi for 1m0s; allocatableMemory.available<1Gi; nodefs.available<10%; nodefs.available<20% for 1m0s; imagefs.available<15%; pid.available<100"
	if d := describe(ts); d != want {
		t.Errorf("order:\n got %s\nwant %s", d, want)
	}
	th, r, ok := reclaimableThreshold(ts[3:])
	if !ok || th.Signal != SignalNodeFsAvailable || r != v1.ResourceEphemeralStorage {
		t.Errorf("reclaimable = %s %s %v", th, r, ok)
	}
	if _, _, ok := reclaimableThreshold(nil); ok {
		t.Error("a threshold to reclaim among none")
	}
}

func TestStarvedResources(t *testing.T) {
	want := map[Signal]v1.ResourceName{
		SignalMemoryAvailable:            v1.ResourceMemory,
		SignalAllocatableMemoryAvailable: v1.ResourceMemory,
		SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
		SignalNodeFsInodesFree:           "inodes",
		SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
		SignalImageFsInodesFree:          "inodes",
		SignalPIDAvailable:               "pids",
	}
	for _, s := range Signals() {
		if r, ok := starvedResource(s); !ok || r != want[s] {
			t.Errorf("%s: %s, want %s", s, r, want[s])
		}
		if _, ok := nodeCondition(s); !ok {
			t.Errorf("%s: no node condition", s)
		}
	}
	if _, ok := starvedResource("cpu.available"); ok {
		t.Error("cpu.available has a resource")
	}
}

// TestAdvance drives the pure state machine through a run of passes: a soft
// memory threshold with a grace period and a minimum reclaim, and a hard one.
func TestAdvance(t *testing.T) {
	soft := withMinReclaim(threshold(t, SignalMemoryAvailable, "2Gi", time.Minute), "1Gi")
	hard := threshold(t, SignalMemoryAvailable, "500Mi", 0)
	config := []Threshold{hard, soft}
	const transition = 5 * time.Minute
	var st state
	for i, pass := range []struct {
		after      time.Duration
		available  string
		statsAt    time.Duration // when the stats were collected
		met, act   string
		conditions []v1.NodeConditionType
	}{
		{after: 0, available: "5Gi", met: "", act: ""},
		// The soft threshold is met: pressure at once, no action yet.
		{after: 10 * time.Second, available: "1.5Gi", met: describe([]Threshold{soft}), act: "", conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		{after: 69 * time.Second, available: "1.5Gi", met: describe([]Threshold{soft}), act: ""},
		// Its grace period has passed.
		{after: 70 * time.Second, available: "1.5Gi", met: describe([]Threshold{soft}), act: describe([]Threshold{soft})},
		// Stats not refreshed since the last pass: nothing to act on.
		{after: 75 * time.Second, statsAt: 70 * time.Second, available: "1.5Gi", met: describe([]Threshold{soft}), act: ""},
		// The hard threshold too; it comes first.
		{after: 80 * time.Second, available: "400Mi", met: describe([]Threshold{hard, soft}), act: describe([]Threshold{hard, soft})},
		// Above the soft threshold, but not 1Gi past it: still acted on.
		{after: 90 * time.Second, available: "2.5Gi", met: describe([]Threshold{soft}), act: describe([]Threshold{soft})},
		// Minimum reclaim satisfied: resolved; pressure stays.
		{after: 100 * time.Second, available: "3Gi", met: "", act: "", conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		// Met again: its grace period starts over.
		{after: 110 * time.Second, available: "1Gi", met: describe([]Threshold{soft}), act: ""},
		{after: 169 * time.Second, available: "5Gi", met: "", act: "", conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		// Pressure ends the transition period after it was last seen (110s).
		{after: 110*time.Second + transition - time.Second, available: "5Gi", conditions: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		{after: 110*time.Second + transition, available: "5Gi"},
	} {
		now := t0.Add(pass.after)
		statsAt := now
		if pass.statsAt != 0 {
			statsAt = t0.Add(pass.statsAt)
		}
		s := st.advance(config, memoryObs(pass.available, statsAt), transition, now)
		name := fmt.Sprintf("pass %d (+%v, %s available)", i, pass.after, pass.available)
		if d := describe(s.met); d != pass.met {
			t.Errorf("%s: met %q, want %q", name, d, pass.met)
		}
		if d := describe(s.act); d != pass.act {
			t.Errorf("%s: act %q, want %q", name, d, pass.act)
		}
		wantConditions := pass.conditions
		if wantConditions == nil && pass.met != "" {
			wantConditions = []v1.NodeConditionType{v1.NodeMemoryPressure}
		}
		if !slices.Equal(s.next.conditions, wantConditions) {
			t.Errorf("%s: conditions %v, want %v", name, s.next.conditions, wantConditions)
		}
		st = s.next
	}
}
