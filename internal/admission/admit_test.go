package admission

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAdmit(t *testing.T) {
	const (
		notCritical = "only a critical pod (static, mirror, or priority ≥ 2000000000) may preempt others"
		outOfCPU    = "Node didn't have enough resource: cpu, requested: 2000, used: 1500, capacity: 2000"
		portsFailed = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
	)
	// 1500m of the node's 2 cpus are taken by two Burstable pods, one on
	// host port 80.
	busy := []*v1.Pod{
		newPod("bu-1", priority(10), burstable("1", "1Gi"), withHostPort(80, "", "")),
		newPod("bu-2", burstable("500m", "1Gi")),
	}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		active []*v1.Pod
		admit  bool
		// reason and message are the kubelet's rejection.
		reason, message string
		insufficient    []v1.ResourceName
		failures        []string
		noPreemption    string
		requirements    Requirements
		victims         []string
	}{
		{
			name:   "fits",
			pod:    newPod("p", burstable("500m", "1Gi")),
			active: busy,
			admit:  true,
		},
		{
			name:         "not critical: rejected for the resource, even with lower priorities about",
			pod:          newPod("p", priority(1_000_000), burstable("2", "")),
			active:       busy,
			reason:       "OutOfcpu",
			message:      outOfCPU,
			insufficient: []v1.ResourceName{"cpu"},
			noPreemption: notCritical,
		},
		{
			name:         "not critical: the resource is reported before the predicate",
			pod:          newPod("p", burstable("2", ""), withHostPort(80, "", "")),
			active:       busy,
			reason:       "OutOfcpu",
			message:      outOfCPU,
			insufficient: []v1.ResourceName{"cpu"},
			failures:     []string{"NodePorts"},
			noPreemption: notCritical,
		},
		{
			name:         "not critical: a predicate alone",
			pod:          newPod("p", nodeSelector("zone", "b")),
			active:       busy,
			reason:       "NodeAffinity",
			message:      "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
			failures:     []string{"NodeAffinity"},
			noPreemption: notCritical,
		},
		{
			name:         "critical with a host port conflict: not a resource, no preemption",
			pod:          newPod("p", static(), burstable("2", ""), withHostPort(80, v1.ProtocolTCP, "")),
			active:       busy,
			reason:       "NodePorts",
			message:      portsFailed,
			insufficient: []v1.ResourceName{"cpu"},
			failures:     []string{"NodePorts"},
			noPreemption: "it also failed NodePorts, which preempting pods cannot cure",
		},
		{
			name:         "critical with a nodeSelector mismatch: its first predicate is the reason",
			pod:          newPod("p", priority(clusterCritical), burstable("2", ""), nodeSelector("zone", "b"), withHostPort(80, "", "")),
			active:       busy,
			reason:       "NodeAffinity",
			message:      "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
			insufficient: []v1.ResourceName{"cpu"},
			failures:     []string{"NodeAffinity", "NodePorts"},
			noPreemption: "it also failed NodeAffinity, which preempting pods cannot cure",
		},
		{
			// 1000m asked, 500m free: 500m short, and only be, which asks
			// no cpu, may go.
			name:         "critical, and not enough even with every candidate",
			pod:          newPod("p", static(), burstable("1", "")),
			active:       []*v1.Pod{newPod("kube-proxy", static(), guaranteed("1500m", "1Gi")), newPod("be")},
			reason:       "UnexpectedAdmissionError",
			message:      "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]",
			insufficient: []v1.ResourceName{"cpu"},
			requirements: Requirements{{"cpu", 500}},
		},
		{
			// 1500m asked, 500m free: 1000m short. bu-1 frees it at 0,
			// bu-2 at ((1000−500)/1000)² = 0.25.
			name:         "critical by priority preempts",
			pod:          newPod("p", priority(clusterCritical), burstable("1500m", "")),
			active:       busy,
			admit:        true,
			insufficient: []v1.ResourceName{"cpu"},
			requirements: Requirements{{"cpu", 1000}},
			victims:      []string{"bu-1"},
		},
		{
			name:         "a mirror pod preempts for a pod slot",
			pod:          newPod("p", mirror()),
			active:       []*v1.Pod{newPod("be1"), newPod("be2"), newPod("be3"), newPod("be4")},
			admit:        true,
			insufficient: []v1.ResourceName{"pods"},
			requirements: Requirements{{"pods", 1}},
			victims:      []string{"be4"},
		},
		{
			// 3Gi of 4Gi and 1500m of 2000m are taken: 1000m and 2Gi short,
			// which bu-big alone frees.
			name: "several resources short at once",
			pod:  newPod("p", static(), guaranteed("1500m", "3Gi")),
			active: []*v1.Pod{
				newPod("bu-big", burstable("1", "2Gi")),
				newPod("bu-small", burstable("500m", "1Gi")),
			},
			admit:        true,
			insufficient: []v1.ResourceName{"cpu", "memory"},
			requirements: Requirements{{"cpu", 1000}, {"memory", 2 * gi}},
			victims:      []string{"bu-big"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := Node{
				Node:   newNode(map[string]string{"zone": "a"}, "cpu", "2", "memory", "4Gi", "pods", "4"),
				Active: infos(tc.active...),
			}
			r := Admit(NewPodInfo(tc.pod), node)
			if r.Admit != tc.admit || r.Reason != tc.reason || r.Message != tc.message {
				t.Errorf("Admit = %v, %q, %q; want %v, %q, %q", r.Admit, r.Reason, r.Message, tc.admit, tc.reason, tc.message)
			}
			var insufficient []v1.ResourceName
			for _, i := range r.Insufficient {
				insufficient = append(insufficient, i.Resource)
			}
			if !slices.Equal(insufficient, tc.insufficient) {
				t.Errorf("Insufficient = %v, want %v", insufficient, tc.insufficient)
			}
			var failures []string
			for _, f := range r.Failures {
				failures = append(failures, f.Name)
			}
			if !slices.Equal(failures, tc.failures) {
				t.Errorf("Failures = %v, want %v", failures, tc.failures)
			}
			if r.NoPreemption != tc.noPreemption {
				t.Errorf("NoPreemption = %q, want %q", r.NoPreemption, tc.noPreemption)
			}
			if (r.Preemption != nil) != (tc.requirements != nil) {
				t.Fatalf("Preemption = %+v, want one for %v", r.Preemption, tc.requirements)
			}
			if r.Preemption == nil {
				return
			}
			if !slices.Equal(r.Preemption.Requirements, tc.requirements) {
				t.Errorf("Requirements = %v, want %v", r.Preemption.Requirements, tc.requirements)
			}
			if got := victimNames(r.Preemption); !slices.Equal(got, ns(tc.victims...)) {
				t.Errorf("victims = %v, want %v", got, ns(tc.victims...))
			}
		})
	}
}
