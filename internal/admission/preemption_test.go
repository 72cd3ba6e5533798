package admission

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const (
	clusterCritical = int32(2_000_000_000)
	nodeCritical    = int32(2_000_001_000)
)

func TestChoosePreemptionVictims(t *testing.T) {
	for _, tc := range []struct {
		name      string
		preemptor *v1.Pod // a static pod when nil
		active    []*v1.Pod
		reqs      Requirements
		// candidates and victims are pod names, in the explanation's order.
		candidates, victims []string
		err                 string
	}{
		{
			// Every pod frees the one slot: all at distance 0, alike in
			// every respect, so the last one wins.
			name:       "BestEffort only, for a pod slot under maxPods",
			active:     []*v1.Pod{newPod("be1"), newPod("be2"), newPod("be3")},
			reqs:       Requirements{{"pods", 1}},
			candidates: []string{"be1", "be2", "be3"},
			victims:    []string{"be3"},
		},
		{
			// Guaranteed: the 4 BestEffort and Burstable pods free 3 slots,
			// none needed. Burstable: the 2 BestEffort pods leave 1 slot;
			// both Burstable pods are at 0, bu-small asks less memory.
			// BestEffort: bu-small leaves 2 slots; each pod is at
			// ((2-1)/2)² = 0.25, the later be2 wins, then be1.
			name:       "every BestEffort pod and a Burstable one, BestEffort killed first",
			active:     []*v1.Pod{newPod("be1"), newPod("bu-small", burstable("100m", "100Mi")), newPod("be2"), newPod("bu-big", burstable("300m", "300Mi")), newPod("g", guaranteed("1", "1Gi"))},
			reqs:       Requirements{{"pods", 3}},
			candidates: []string{"be1", "be2", "bu-small", "bu-big", "g"},
			victims:    []string{"be2", "be1", "bu-small"},
		},
		{
			// Guaranteed: be1 and bu free 500m of the 1500m, 1000m left;
			// g-small (1000m) and g-big (2000m) are both at 0 and g-small
			// asks less memory. Burstable: be1 and g-small leave 500m, which
			// bu frees. BestEffort: bu and g-small free it all.
			name:       "Guaranteed only for what BestEffort and Burstable cannot free",
			active:     []*v1.Pod{newPod("be1"), newPod("bu", burstable("500m", "512Mi")), newPod("g-small", guaranteed("1", "1Gi")), newPod("g-big", guaranteed("2", "2Gi"))},
			reqs:       Requirements{{"cpu", 1500}},
			candidates: []string{"be1", "bu", "g-small", "g-big"},
			victims:    []string{"bu", "g-small"},
		},
		{
			name:       "one of each class, killed BestEffort, Burstable, Guaranteed",
			active:     []*v1.Pod{newPod("g", guaranteed("1", "1Gi")), newPod("bu", burstable("500m", "512Mi")), newPod("be")},
			reqs:       Requirements{{"cpu", 1500}, {"pods", 3}},
			candidates: []string{"be", "bu", "g"},
			victims:    []string{"be", "bu", "g"},
		},
		{
			name:       "not enough even with every candidate",
			active:     []*v1.Pod{newPod("static", static(), guaranteed("1500m", "1Gi")), newPod("be1")},
			reqs:       Requirements{{"cpu", 500}},
			candidates: []string{"be1"},
			err:        "no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]",
		},
		{
			name:       "only the requirements left unmet are in the error",
			active:     []*v1.Pod{newPod("bu", burstable("2", "1Gi"))},
			reqs:       Requirements{{"cpu", 1000}, {"memory", 2 * gi}, {"pods", 3}},
			candidates: []string{"bu"},
			err:        "no set of running pods found to reclaim resources: [(res: memory, q: 1073741824), (res: pods, q: 2), ]",
		},
		{
			// The critical pods could free everything; only the two
			// ordinary ones may go, and together they just suffice.
			name:      "critical pods are never candidates",
			preemptor: newPod("p", priority(clusterCritical)),
			active: []*v1.Pod{
				newPod("static", static(), guaranteed("2", "2Gi")),
				newPod("mirror", mirror(), guaranteed("2", "2Gi")),
				newPod("cluster-critical", priority(clusterCritical), guaranteed("2", "2Gi")),
				newPod("node-critical", priority(nodeCritical), guaranteed("2", "2Gi")),
				newPod("bu", priority(1000), burstable("600m", "")),
				newPod("g", guaranteed("600m", "1Gi")),
			},
			reqs:       Requirements{{"cpu", 1000}},
			candidates: []string{"bu", "g"},
			victims:    []string{"bu", "g"},
		},
		{
			// A critical pod outranked by priority may go, whatever its
			// criticality: so may a static pod that carries a lower
			// priority, as in the kubelet. Both free the cpu at distance
			// 0; the cluster-critical pod asks less memory.
			name:      "a higher priority preempts a critical pod",
			preemptor: newPod("p", priority(nodeCritical)),
			active: []*v1.Pod{
				newPod("cluster-critical", priority(clusterCritical), guaranteed("1", "1Gi")),
				newPod("node-critical", priority(nodeCritical), guaranteed("1", "512Mi")),
				newPod("static", static(), guaranteed("1", "512Mi")),
				newPod("static-low", static(), priority(100), guaranteed("1", "2Gi")),
			},
			reqs:       Requirements{{"cpu", 1000}},
			candidates: []string{"cluster-critical", "static-low"},
			victims:    []string{"cluster-critical"},
		},
		{
			// Worked in TestPreemptionExplanation.
			name: "several resources at once",
			active: []*v1.Pod{
				newPod("a", burstable("1", "512Mi")),
				newPod("b", burstable("500m", "2Gi")),
				newPod("c", burstable("250m", "1Gi")),
			},
			reqs:       Requirements{{"cpu", 1000}, {"memory", 2 * gi}, {"pods", 1}},
			candidates: []string{"a", "b", "c"},
			victims:    []string{"b", "a"},
		},
		{
			name:       "the pod closer to the requirements beats the smaller one",
			active:     []*v1.Pod{newPod("big", burstable("1", "1Gi")), newPod("small", burstable("100m", "1Mi"))},
			reqs:       Requirements{{"cpu", 1000}},
			candidates: []string{"big", "small"},
			victims:    []string{"big"},
		},
		{
			name: "equal distance: the smaller memory request wins, whatever the cpu",
			active: []*v1.Pod{
				newPod("m256", burstable("100m", "256Mi")),
				newPod("m128", burstable("900m", "128Mi")),
				newPod("m512", burstable("100m", "512Mi")),
			},
			reqs:       Requirements{{"pods", 1}},
			candidates: []string{"m256", "m128", "m512"},
			victims:    []string{"m128"},
		},
		{
			name: "equal distance and memory: the smaller cpu request wins",
			active: []*v1.Pod{
				newPod("c300", burstable("300m", "128Mi")),
				newPod("c100", burstable("100m", "128Mi")),
				newPod("c200", burstable("200m", "128Mi")),
			},
			reqs:       Requirements{{"pods", 1}},
			candidates: []string{"c300", "c100", "c200"},
			victims:    []string{"c100"},
		},
		{
			name:       "a full tie goes to the later pod",
			active:     []*v1.Pod{newPod("x", burstable("400m", "128Mi")), newPod("y", burstable("400m", "128Mi")), newPod("z", burstable("400m", "128Mi"))},
			reqs:       Requirements{{"cpu", 400}},
			candidates: []string{"x", "y", "z"},
			victims:    []string{"z"},
		},
		{
			// Round 1, 1000m: y is at ((1000-600)/1000)² = 0.16, the others
			// at ((1000-400)/1000)² = 0.36; y goes and w, the last, takes
			// its place: x, w, z. Round 2, 400m: all three at 0 and alike,
			// so the last, z, wins. Removing y in place would have left
			// x, z, w and chosen w.
			name: "a full tie after a pod is taken: the kubelet's swap-remove order",
			active: []*v1.Pod{
				newPod("x", burstable("400m", "128Mi")),
				newPod("y", burstable("600m", "128Mi")),
				newPod("z", burstable("400m", "128Mi")),
				newPod("w", burstable("400m", "128Mi")),
			},
			reqs:       Requirements{{"cpu", 1000}},
			candidates: []string{"x", "y", "z", "w"},
			victims:    []string{"y", "z"},
		},
		{
			name:       "nothing to free",
			active:     []*v1.Pod{newPod("be1"), newPod("g", guaranteed("1", "1Gi"))},
			candidates: []string{"be1", "g"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			preemptor := tc.preemptor
			if preemptor == nil {
				preemptor = newPod("p", static())
			}
			active := infos(tc.active...)
			got, err := choosePreemptionVictims(NewPodInfo(preemptor), active, tc.reqs)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err) {
				t.Fatalf("error = %v, want %q", err, tc.err)
			}
			if names := candidateNames(got); !slices.Equal(names, ns(tc.candidates...)) {
				t.Errorf("candidates = %v, want %v", names, ns(tc.candidates...))
			}
			if names := victimNames(got); !slices.Equal(names, ns(tc.victims...)) {
				t.Errorf("victims = %v, want %v", names, ns(tc.victims...))
			}
			if got := got.VictimPods(); len(got) != len(tc.victims) {
				t.Errorf("VictimPods = %d pods, want %d", len(got), len(tc.victims))
			}
			if err == nil {
				checkEveryPodExplained(t, got, active)
			}
		})
	}
}

// checkEveryPodExplained checks that each active pod is a victim or passed
// over with a reason, and not both.
func checkEveryPodExplained(t *testing.T, p *Preemption, active []*PodInfo) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range p.Victims {
		seen[v.Pod]++
	}
	for _, po := range p.PassedOver {
		seen[po.Pod]++
		if po.Why == "" {
			t.Errorf("%s passed over without a reason", po.Pod)
		}
	}
	for _, a := range active {
		name := a.Pod.Namespace + "/" + a.Pod.Name
		if seen[name] != 1 {
			t.Errorf("%s is a victim or passed over %d times, want once", name, seen[name])
		}
	}
	if n := len(p.Victims) + len(p.PassedOver); n != len(active) {
		t.Errorf("%d pods explained, %d active", n, len(active))
	}
}

func TestPreemptionExplanation(t *testing.T) {
	t.Run("several resources at once", func(t *testing.T) {
		// Requirements: cpu 1000m, memory 2Gi, 1 pod slot; all Burstable.
		// Round 1, distance = Σ ((needed − request)/needed)², positive only:
		//   a (1000m, 512Mi): cpu 0; memory ((2048−512)/2048)² = 0.5625;
		//                     slot 0                          → 0.5625
		//   b (500m, 2Gi):    cpu ((1000−500)/1000)² = 0.25;
		//                     memory 0; slot 0                → 0.25
		//   c (250m, 1Gi):    cpu ((1000−250)/1000)² = 0.5625;
		//                     memory ((2048−1024)/2048)² = 0.25 → 0.8125
		// b goes; left: cpu 500m (memory and the slot are met).
		// Round 2: a (1000m) is at 0, c ((500−250)/500)² = 0.25; a goes.
		active := infos(
			newPod("a", burstable("1", "512Mi")),
			newPod("b", burstable("500m", "2Gi")),
			newPod("c", burstable("250m", "1Gi")),
		)
		reqs := Requirements{{"cpu", 1000}, {"memory", 2 * gi}, {"pods", 1}}
		got, err := choosePreemptionVictims(NewPodInfo(newPod("p", static())), active, reqs)
		if err != nil {
			t.Fatal(err)
		}
		checkVictims(t, got.Victims, []victimWant{
			{"default/b", reqs, 0.25},
			{"default/a", Requirements{{"cpu", 500}}, 0},
		})
		checkPassedOver(t, got.PassedOver, map[string]string{
			"default/c": "the pods chosen before it freed enough",
		})
		if d := got.PassedOver[0].Distance; d == nil || *d != 0.8125 {
			t.Errorf("c's distance %v, want 0.8125, as worked out above", d)
		}
		if !slices.Equal(got.Requirements, reqs) {
			t.Errorf("Requirements = %v, want %v", got.Requirements, reqs)
		}
		want := Candidate{Pod: "default/c", UID: "c", QOS: v1.PodQOSBurstable,
			Requests: map[v1.ResourceName]int64{"cpu": 250, "memory": gi}}
		if c := got.Candidates[2]; c.Pod != want.Pod || c.UID != want.UID || c.QOS != want.QOS ||
			len(c.Requests) != 2 || c.Requests["cpu"] != 250 || c.Requests["memory"] != gi {
			t.Errorf("candidate = %+v, want %+v", c, want)
		}
	})
	t.Run("across classes, with pods that may not be preempted", func(t *testing.T) {
		// Guaranteed: every BestEffort and Burstable pod frees 500m of
		// 1500m; g-small and g-big both free the 1000m left, at 0, and
		// g-small asks less memory. Burstable: be and g-small leave 500m,
		// bu frees it at 0. BestEffort: nothing is left.
		active := infos(
			newPod("be"),
			newPod("bu", burstable("500m", "512Mi")),
			newPod("g-small", guaranteed("1", "1Gi")),
			newPod("g-big", guaranteed("2", "2Gi")),
			newPod("node-critical", priority(nodeCritical), guaranteed("4", "4Gi")),
			newPod("static", static(), guaranteed("4", "4Gi")),
		)
		reqs := Requirements{{"cpu", 1500}}
		got, err := choosePreemptionVictims(NewPodInfo(newPod("p", priority(nodeCritical))), active, reqs)
		if err != nil {
			t.Fatal(err)
		}
		checkVictims(t, got.Victims, []victimWant{
			{"default/bu", Requirements{{"cpu", 500}}, 0},
			{"default/g-small", Requirements{{"cpu", 1000}}, 0},
		})
		checkPassedOver(t, got.PassedOver, map[string]string{
			"default/node-critical": "it is critical (priority 2000001000 ≥ 2000000000) and its priority (2000001000) is not below the preempting pod's (2000001000)",
			"default/static":        "it is critical (a static pod) and one of the two pods has no priority",
			"default/be":            "evicting the Burstable and Guaranteed victims frees enough",
			"default/g-big":         "the pods chosen before it freed enough",
		})
	})
	t.Run("unneeded classes", func(t *testing.T) {
		active := infos(newPod("be"), newPod("bu", burstable("1", "")), newPod("g", guaranteed("1", "1Gi")), newPod("mirror", mirror()))
		got, err := choosePreemptionVictims(NewPodInfo(newPod("p", static())), active, Requirements{{"pods", 1}})
		if err != nil {
			t.Fatal(err)
		}
		checkVictims(t, got.Victims, []victimWant{{"default/be", Requirements{{"pods", 1}}, 0}})
		checkPassedOver(t, got.PassedOver, map[string]string{
			"default/mirror": "it is critical (a mirror pod) and one of the two pods has no priority",
			"default/bu":     "evicting every BestEffort candidate and the Guaranteed victims frees enough",
			"default/g":      "evicting every BestEffort and Burstable candidate frees enough",
		})
	})
}

type victimWant struct {
	pod       string
	remaining Requirements
	distance  float64
}

func checkVictims(t *testing.T, got []Victim, want []victimWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d victims, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Pod != w.pod || !slices.Equal(g.Remaining, w.remaining) || g.Distance != w.distance {
			t.Errorf("victim %d = %s, remaining %v, distance %v; want %s, %v, %v",
				i, g.Pod, g.Remaining, g.Distance, w.pod, w.remaining, w.distance)
		}
	}
}

func checkPassedOver(t *testing.T, got []PassedOver, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d pods passed over, want %d: %+v", len(got), len(want), got)
	}
	for _, p := range got {
		if w, ok := want[p.Pod]; !ok || p.Why != w {
			t.Errorf("%s passed over because %q, want %q", p.Pod, p.Why, w)
		}
	}
}

func TestRequirements(t *testing.T) {
	pod := NewPodInfo(newPod("a", burstable("300m", "1Gi")))
	for _, tc := range []struct {
		name     string
		reqs     Requirements
		left     Requirements
		distance float64
		text     string
	}{
		{name: "none", text: "[]"},
		{
			// ((1200−300)/1200)² = 0.5625; memory and the slot are met.
			name:     "partly met",
			reqs:     Requirements{{"cpu", 1200}, {"memory", gi}, {"pods", 1}},
			left:     Requirements{{"cpu", 900}},
			distance: 0.5625,
			text:     "[(res: cpu, q: 1200), (res: memory, q: 1073741824), (res: pods, q: 1), ]",
		},
		{
			// ((2Gi−1Gi)/2Gi)² + ((2−1)/2)² = 0.25 + 0.25; the pod asks
			// no gpu: (4/4)² = 1.
			name:     "unmet",
			reqs:     Requirements{{"memory", 2 * gi}, {"pods", 2}, {"example.com/gpu", 4}},
			left:     Requirements{{"memory", gi}, {"pods", 1}, {"example.com/gpu", 4}},
			distance: 1.5,
			text:     "[(res: memory, q: 2147483648), (res: pods, q: 2), (res: example.com/gpu, q: 4), ]",
		},
	} {
		if got := tc.reqs.subtract(pod); !slices.Equal(got, tc.left) {
			t.Errorf("%s: subtract = %v, want %v", tc.name, got, tc.left)
		}
		if got := tc.reqs.distance(pod); got != tc.distance {
			t.Errorf("%s: distance = %v, want %v", tc.name, got, tc.distance)
		}
		if got := tc.reqs.String(); got != tc.text {
			t.Errorf("%s: String = %q, want %q", tc.name, got, tc.text)
		}
	}
}

func TestRequirementsOf(t *testing.T) {
	got := requirementsOf([]InsufficientResource{
		{Resource: "pods", Requested: 1, Used: 110, Capacity: 110},
		{Resource: "cpu", Requested: 1000, Used: 1500, Capacity: 2000},
	})
	if want := (Requirements{{"pods", 1}, {"cpu", 500}}); !slices.Equal(got, want) {
		t.Errorf("requirementsOf = %v, want %v", got, want)
	}
}
