package eviction

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestUpdateConditions(t *testing.T) {
	type want struct {
		status     v1.ConditionStatus
		reason     string
		message    string
		transition time.Time
	}
	check := func(t *testing.T, conds []v1.NodeCondition, now time.Time, wants map[v1.NodeConditionType]want) {
		t.Helper()
		if got := len(conds); got != 3 {
			t.Fatalf("%d conditions, want 3", got)
		}
		for i, c := range conds {
			if c.Type != conditionTypes()[i] {
				t.Errorf("condition %d is %s, want %s", i, c.Type, conditionTypes()[i])
			}
			w := wants[c.Type]
			if c.Status != w.status || c.Reason != w.reason || c.Message != w.message || !c.LastTransitionTime.Time.Equal(w.transition) {
				t.Errorf("%s = %s %s %q since %v, want %s %s %q since %v", c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime.Time,
					w.status, w.reason, w.message, w.transition)
			}
			if !c.LastHeartbeatTime.Time.Equal(now) {
				t.Errorf("%s heartbeat %v, want %v", c.Type, c.LastHeartbeatTime.Time, now)
			}
		}
	}
	noMemory := want{v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available", t0}
	noDisk := want{v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure", t0}
	noPID := want{v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available", t0}

	// The first pass: every condition leaves Unknown, with its event.
	conds, events := updateConditions(initialConditions(), nil, t0)
	check(t, conds, t0, map[v1.NodeConditionType]want{v1.NodeMemoryPressure: noMemory, v1.NodeDiskPressure: noDisk, v1.NodePIDPressure: noPID})
	if want := []string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"}; !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}

	// Disk and PID pressure.
	t1 := t0.Add(10 * time.Second)
	conds, events = updateConditions(conds, []v1.NodeConditionType{v1.NodeDiskPressure, v1.NodePIDPressure}, t1)
	check(t, conds, t1, map[v1.NodeConditionType]want{
		v1.NodeMemoryPressure: noMemory,
		v1.NodeDiskPressure:   {v1.ConditionTrue, "KubeletHasDiskPressure", "kubelet has disk pressure", t1},
		v1.NodePIDPressure:    {v1.ConditionTrue, "KubeletHasInsufficientPID", "kubelet has insufficient PID available", t1},
	})
	if want := []string{"NodeHasDiskPressure", "NodeHasInsufficientPID"}; !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}

	// Unchanged: only the heartbeat moves.
	t2 := t1.Add(10 * time.Second)
	conds, events = updateConditions(conds, []v1.NodeConditionType{v1.NodeDiskPressure, v1.NodePIDPressure}, t2)
	if len(events) != 0 {
		t.Errorf("events %v, want none", events)
	}
	check(t, conds, t2, map[v1.NodeConditionType]want{
		v1.NodeMemoryPressure: noMemory,
		v1.NodeDiskPressure:   {v1.ConditionTrue, "KubeletHasDiskPressure", "kubelet has disk pressure", t1},
		v1.NodePIDPressure:    {v1.ConditionTrue, "KubeletHasInsufficientPID", "kubelet has insufficient PID available", t1},
	})

	// Memory pressure; the others clear.
	t3 := t2.Add(10 * time.Second)
	conds, events = updateConditions(conds, []v1.NodeConditionType{v1.NodeMemoryPressure}, t3)
	check(t, conds, t3, map[v1.NodeConditionType]want{
		v1.NodeMemoryPressure: {v1.ConditionTrue, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available", t3},
		v1.NodeDiskPressure:   {noDisk.status, noDisk.reason, noDisk.message, t3},
		v1.NodePIDPressure:    {noPID.status, noPID.reason, noPID.message, t3},
	})
	if want := []string{"NodeHasInsufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"}; !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}
}

func TestInitialConditions(t *testing.T) {
	for _, c := range initialConditions() {
		if c.Status != v1.ConditionUnknown || c.Message == "" {
			t.Errorf("%s: %s %q, want Unknown with a message", c.Type, c.Status, c.Message)
		}
	}
}
