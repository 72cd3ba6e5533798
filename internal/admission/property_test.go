package admission

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// TestPreemptionProperties checks choosePreemptionVictims on random nodes
// against the invariants of the seed's algorithm, and against a plain
// transcription of the kubelet's getPodsToPreempt.
func TestPreemptionProperties(t *testing.T) {
	const cases = 2000
	var chosen, failed int
	victimsOf := map[string]int{} // victims by kind; "several": cases with more than one
	for i := range cases {
		rng := rand.New(rand.NewPCG(2024, uint64(i)))
		preemptor := NewPodInfo(randomPreemptor(rng))
		active := make([]*PodInfo, rng.IntN(31))
		for j := range active {
			active[j] = NewPodInfo(randomPod(rng, j))
		}
		reqs := randomRequirements(rng)
		desc := fmt.Sprintf("case %d: reqs %v", i, reqs)

		got, err := choosePreemptionVictims(preemptor, active, reqs)
		var candidates []*PodInfo
		for _, q := range []v1.PodQOSClass{v1.PodQOSBestEffort, v1.PodQOSBurstable, v1.PodQOSGuaranteed} {
			for _, p := range active {
				if p.QOS == q && v1helper.Preemptable(preemptor.Pod, p.Pod) {
					candidates = append(candidates, p)
				}
			}
		}
		if names := candidateNames(got); !slices.Equal(names, podNames(candidates)) {
			t.Fatalf("%s: candidates %v, want %v", desc, names, podNames(candidates))
		}
		want, ok := kubeletPodsToPreempt(candidates, reqs)
		if err != nil {
			failed++
			if frees(candidates, reqs) {
				t.Fatalf("%s: %v, yet every candidate together frees enough", desc, err)
			}
			if !strings.HasPrefix(err.Error(), "no set of running pods found to reclaim resources: [") {
				t.Fatalf("%s: error %q", desc, err)
			}
			continue
		}
		chosen++
		if !ok {
			t.Fatalf("%s: chose %v where the kubelet finds nothing", desc, victimNames(got))
		}
		victims := got.VictimPods()
		if !slices.Equal(victims, want) {
			t.Fatalf("%s: victims %v, the kubelet's %v", desc, podNames(victims), podNames(want))
		}
		checkVictimInvariants(t, desc, preemptor, candidates, got, reqs)
		for _, v := range victims {
			victimsOf[string(v.QOS)]++
			if v1helper.IsCriticalPod(v.Pod) {
				victimsOf["critical"]++
			}
		}
		if len(victims) > 1 {
			victimsOf["several"]++
		}
		checkEveryPodExplained(t, got, active)
	}
	// Both outcomes, and victims of every kind, must be common for the
	// invariants to mean anything.
	t.Logf("%d cases chose victims, %d failed; victims: %v", chosen, failed, victimsOf)
	if chosen < cases/5 || failed < cases/5 {
		t.Errorf("%d cases chose victims, %d failed: the generator is lopsided", chosen, failed)
	}
	for _, kind := range []string{"BestEffort", "Burstable", "Guaranteed", "critical", "several"} {
		if victimsOf[kind] < cases/50 {
			t.Errorf("only %d victims %s", victimsOf[kind], kind)
		}
	}
}

func checkVictimInvariants(t *testing.T, desc string, preemptor *PodInfo, candidates []*PodInfo, got *Preemption, reqs Requirements) {
	t.Helper()
	victims := got.VictimPods()
	byClass := map[v1.PodQOSClass][]*PodInfo{}
	for i, v := range victims {
		if slices.Index(victims, v) != i {
			t.Fatalf("%s: %s is a victim twice", desc, v.Pod.Name)
		}
		if i > 0 && qosRank(victims[i-1].QOS) > qosRank(v.QOS) {
			t.Fatalf("%s: victims not ordered by QoS: %v", desc, podNames(victims))
		}
		if !v1helper.Preemptable(preemptor.Pod, v.Pod) {
			t.Fatalf("%s: %s may not be preempted", desc, v.Pod.Name)
		}
		// Only a lower priority exposes a critical pod.
		if v1helper.IsCriticalPod(v.Pod) && (v.Pod.Spec.Priority == nil || *v.Pod.Spec.Priority >= *preemptor.Pod.Spec.Priority) {
			t.Fatalf("%s: critical %s is a victim", desc, v.Pod.Name)
		}
		// Each was needed when chosen, at the distance stated.
		vc := got.Victims[i]
		if len(vc.Remaining) == 0 || vc.Distance != referenceDistance(vc.Remaining, v) {
			t.Fatalf("%s: %s chosen with %v left at %v", desc, v.Pod.Name, vc.Remaining, vc.Distance)
		}
		byClass[v.QOS] = append(byClass[v.QOS], v)
	}
	if !frees(victims, reqs) {
		t.Fatalf("%s: victims %v do not free enough", desc, podNames(victims))
	}
	inClass := func(q v1.PodQOSClass) []*PodInfo {
		var out []*PodInfo
		for _, c := range candidates {
			if c.QOS == q {
				out = append(out, c)
			}
		}
		return out
	}
	be, bu, g := byClass[v1.PodQOSBestEffort], byClass[v1.PodQOSBurstable], byClass[v1.PodQOSGuaranteed]
	if len(g) > 0 && frees(concat(inClass(v1.PodQOSBestEffort), inClass(v1.PodQOSBurstable)), reqs) {
		t.Fatalf("%s: Guaranteed victims though every BestEffort and Burstable pod frees enough", desc)
	}
	if len(bu) > 0 && frees(concat(inClass(v1.PodQOSBestEffort), g), reqs) {
		t.Fatalf("%s: Burstable victims though the BestEffort pods and Guaranteed victims free enough", desc)
	}
	if len(be) > 0 && frees(concat(bu, g), reqs) {
		t.Fatalf("%s: BestEffort victims though the other victims free enough", desc)
	}
}

// kubeletPodsToPreempt is getPodsToPreempt as the seed gives it, over
// candidates already bucketed in order.
func kubeletPodsToPreempt(candidates []*PodInfo, reqs Requirements) ([]*PodInfo, bool) {
	var be, bu, g []*PodInfo
	for _, c := range candidates {
		switch c.QOS {
		case v1.PodQOSBestEffort:
			be = append(be, c)
		case v1.PodQOSBurstable:
			bu = append(bu, c)
		default:
			g = append(g, c)
		}
	}
	if !frees(candidates, reqs) {
		return nil, false
	}
	gv := kubeletByDistance(g, referenceLeft(reqs, concat(be, bu)))
	bv := kubeletByDistance(bu, referenceLeft(reqs, concat(be, gv)))
	ev := kubeletByDistance(be, referenceLeft(reqs, concat(bv, gv)))
	return concat(ev, bv, gv), true
}

func kubeletByDistance(bucket []*PodInfo, reqs Requirements) []*PodInfo {
	pods := slices.Clone(bucket)
	var out []*PodInfo
	for len(reqs) > 0 {
		best, bestDistance := 0, float64(len(reqs)+1)
		for i, p := range pods {
			d := referenceDistance(reqs, p)
			if d < bestDistance || d == bestDistance && !largerRequest(p, pods[best]) {
				best, bestDistance = i, d
			}
		}
		out = append(out, pods[best])
		reqs = referenceLeft(reqs, []*PodInfo{pods[best]})
		pods[best] = pods[len(pods)-1]
		pods = pods[:len(pods)-1]
	}
	return out
}

// largerRequest compares memory, then cpu.
func largerRequest(a, b *PodInfo) bool {
	if a.Request(v1.ResourceMemory) != b.Request(v1.ResourceMemory) {
		return a.Request(v1.ResourceMemory) > b.Request(v1.ResourceMemory)
	}
	return a.Request(v1.ResourceCPU) > b.Request(v1.ResourceCPU)
}

func referenceDistance(reqs Requirements, p *PodInfo) float64 {
	var d float64
	for _, r := range reqs {
		if left := r.Quantity - p.Request(r.Resource); left > 0 {
			f := float64(left) / float64(r.Quantity)
			d += f * f
		}
	}
	return d
}

// referenceLeft is what remains of reqs once pods are gone.
func referenceLeft(reqs Requirements, pods []*PodInfo) Requirements {
	var out Requirements
	for _, r := range reqs {
		left := r.Quantity
		for _, p := range pods {
			left -= p.Request(r.Resource)
		}
		if left > 0 {
			out = append(out, Requirement{r.Resource, left})
		}
	}
	return out
}

func frees(pods []*PodInfo, reqs Requirements) bool { return len(referenceLeft(reqs, pods)) == 0 }

func qosRank(q v1.PodQOSClass) int {
	return slices.Index([]v1.PodQOSClass{v1.PodQOSBestEffort, v1.PodQOSBurstable, v1.PodQOSGuaranteed}, q)
}

func podNames(pods []*PodInfo) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Pod.Namespace+"/"+p.Pod.Name)
	}
	return out
}

// randomPod draws requests from coarse steps, so that equal distances and
// equal requests, and so the tie-breaks, are frequent.
func randomPod(rng *rand.Rand, i int) *v1.Pod {
	cpu := fmt.Sprintf("%dm", 250*(1+rng.IntN(8)))
	mem := fmt.Sprintf("%dMi", 256*(1+rng.IntN(8)))
	var opts []podOpt
	switch rng.IntN(4) {
	case 0: // BestEffort
	case 1:
		opts = append(opts, burstable(cpu, mem))
	case 2:
		opts = append(opts, [...]podOpt{burstable(cpu, ""), burstable("", mem)}[rng.IntN(2)])
	default:
		opts = append(opts, guaranteed(cpu, mem))
	}
	if rng.IntN(8) == 0 {
		opts = append(opts, func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "dev",
				Resources: v1.ResourceRequirements{Requests: res("example.com/gpu", fmt.Sprint(1+rng.IntN(2)))}})
		})
	}
	switch rng.IntN(12) {
	case 0:
		opts = append(opts, static())
	case 1:
		opts = append(opts, mirror())
	}
	switch rng.IntN(6) {
	case 0: // no priority
	case 1:
		opts = append(opts, priority(clusterCritical))
	case 2:
		opts = append(opts, priority(nodeCritical))
	default:
		opts = append(opts, priority(rng.Int32N(1000)))
	}
	return newPod(fmt.Sprintf("p%02d", i), opts...)
}

func randomPreemptor(rng *rand.Rand) *v1.Pod {
	return newPod("preemptor", [...]podOpt{
		static(),
		mirror(),
		priority(clusterCritical),
		priority(nodeCritical),
		func(p *v1.Pod) { static()(p); priority(nodeCritical)(p) },
	}[rng.IntN(5)])
}

// randomRequirements is a non-empty set of cpu, memory, pod slots and
// GPUs, each short by up to about what half a full node holds.
func randomRequirements(rng *rand.Rand) Requirements {
	var out Requirements
	for len(out) == 0 {
		if rng.IntN(2) == 0 {
			out = append(out, Requirement{"cpu", 1 + rng.Int64N(12000)})
		}
		if rng.IntN(2) == 0 {
			out = append(out, Requirement{"memory", 1 + rng.Int64N(12*gi)})
		}
		if rng.IntN(3) == 0 {
			out = append(out, Requirement{"pods", 1 + rng.Int64N(8)})
		}
		if rng.IntN(6) == 0 {
			out = append(out, Requirement{"example.com/gpu", 1 + rng.Int64N(3)})
		}
	}
	return out
}
