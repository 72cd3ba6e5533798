package admission

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/v1helper"
)

// Candidate is an active pod, as a preemption explains it.
type Candidate struct {
	Pod string         `json:"pod"` // namespace/name
	UID types.UID      `json:"uid"`
	QOS v1.PodQOSClass `json:"qos"`
	// Requests are its requests, in the kubelet's units.
	Requests map[v1.ResourceName]int64 `json:"requests,omitempty"`
}

// Victim is a pod chosen to be preempted.
type Victim struct {
	Candidate
	// Remaining is what was still to be freed when it was chosen, and
	// Distance its distance from that.
	Remaining Requirements `json:"remaining"`
	Distance  float64      `json:"distance"`

	info *PodInfo
}

// PassedOver is an active pod that is not a victim, and why.
type PassedOver struct {
	Candidate
	Why string `json:"why"`
	// Distance is, for a candidate of a class that had to give victims,
	// its distance from the requirements when the first victim was chosen.
	Distance *float64 `json:"distance,omitempty"`
}

// whyNotCloser is why a candidate of a class that gave victims is not one.
const whyNotCloser = "the pods chosen before it freed enough"

// Preemption is the seed's choice of the pods a critical pod preempts, with
// what it rests on: what must be freed, which pods could be preempted, by
// QoS class, and why each was or was not chosen.
type Preemption struct {
	Requirements Requirements `json:"requirements"`
	// Candidates are the pods the critical pod may preempt, BestEffort
	// first, then Burstable, then Guaranteed.
	Candidates []Candidate `json:"candidates"`
	// Victims are in the order they are killed: BestEffort, Burstable,
	// Guaranteed.
	Victims    []Victim     `json:"victims,omitempty"`
	PassedOver []PassedOver `json:"passedOver,omitempty"`
}

// VictimPods are the pods to kill, in order.
func (p *Preemption) VictimPods() []*PodInfo {
	out := make([]*PodInfo, len(p.Victims))
	for i := range p.Victims {
		out[i] = p.Victims[i].info
	}
	return out
}

// choosePreemptionVictims is the kubelet's getPodsToPreempt: the fewest and
// smallest lower-QoS pods whose eviction frees reqs. Guaranteed pods are
// taken only for what all BestEffort and Burstable candidates together
// cannot free, Burstable pods only for what all BestEffort candidates and
// those Guaranteed pods cannot, and BestEffort pods for what the chosen
// Burstable and Guaranteed pods leave. It fails when even every candidate
// would not free enough; the explanation is returned either way.
func choosePreemptionVictims(preemptor *PodInfo, active []*PodInfo, reqs Requirements) (*Preemption, error) {
	out := &Preemption{Requirements: reqs, Candidates: make([]Candidate, 0, len(active)),
		PassedOver: make([]PassedOver, 0, len(active))}
	var bestEffort, burstable, guaranteed []*PodInfo
	for _, p := range active {
		if !v1helper.Preemptable(preemptor.Pod, p.Pod) {
			out.PassedOver = append(out.PassedOver, PassedOver{Candidate: candidate(p), Why: notPreemptable(preemptor.Pod, p.Pod)})
			continue
		}
		switch p.QOS {
		case v1.PodQOSBestEffort:
			bestEffort = append(bestEffort, p)
		case v1.PodQOSBurstable:
			burstable = append(burstable, p)
		default:
			guaranteed = append(guaranteed, p)
		}
	}
	for _, bucket := range [][]*PodInfo{bestEffort, burstable, guaranteed} {
		for _, p := range bucket {
			out.Candidates = append(out.Candidates, candidate(p))
		}
	}
	if left := reqs.subtract(concat(bestEffort, burstable, guaranteed)...); len(left) > 0 {
		return out, fmt.Errorf("no set of running pods found to reclaim resources: %v", left)
	}
	g, err := byDistance(guaranteed, reqs.subtract(concat(bestEffort, burstable)...),
		"evicting every BestEffort and Burstable candidate frees enough")
	if err != nil {
		return out, err
	}
	b, err := byDistance(burstable, reqs.subtract(concat(bestEffort, g.chosen)...),
		"evicting every BestEffort candidate and the Guaranteed victims frees enough")
	if err != nil {
		return out, err
	}
	e, err := byDistance(bestEffort, reqs.subtract(concat(b.chosen, g.chosen)...),
		"evicting the Burstable and Guaranteed victims frees enough")
	if err != nil {
		return out, err
	}
	for _, r := range []bucketChoice{e, b, g} {
		out.Victims = append(out.Victims, r.victims...)
		out.PassedOver = append(out.PassedOver, r.passed...)
	}
	return out, nil
}

// bucketChoice is what byDistance chose in one QoS class.
type bucketChoice struct {
	chosen  []*PodInfo
	victims []Victim
	passed  []PassedOver
}

// byDistance is the kubelet's getPodsToPreemptByDistance: until reqs are
// met, take the pod closest to what remains, the one with the smaller
// request on a tie. It takes pods out of its own copy of the bucket as the
// kubelet does (the last one moves into the gap), since that order decides
// among pods alike in every respect. unneeded says why no pod of the
// bucket is needed when reqs are met already.
func byDistance(bucket []*PodInfo, reqs Requirements, unneeded string) (bucketChoice, error) {
	var out bucketChoice
	pods := slices.Clone(bucket)
	firstDistance := make(map[*PodInfo]float64, len(pods))
	for round := 0; len(reqs) > 0; round++ {
		if len(pods) == 0 {
			// The caller asks a bucket only for what it can free, so this
			// is the kubelet's safety net, not a path it takes.
			return out, fmt.Errorf("no set of running pods found to reclaim resources: %v", reqs)
		}
		// Every distance is below len(reqs): each term is at most 1.
		best, bestDistance := 0, float64(len(reqs)+1)
		for i, p := range pods {
			d := reqs.distance(p)
			if round == 0 {
				firstDistance[p] = d
			}
			if d < bestDistance || (d == bestDistance && smallerResourceRequest(p, pods[best])) {
				best, bestDistance = i, d
			}
		}
		chosen := pods[best]
		out.chosen = append(out.chosen, chosen)
		out.victims = append(out.victims, Victim{Candidate: candidate(chosen), Remaining: reqs, Distance: bestDistance, info: chosen})
		reqs = reqs.subtract(chosen)
		pods[best] = pods[len(pods)-1]
		pods = pods[:len(pods)-1]
	}
	for _, p := range bucket {
		if slices.Contains(out.chosen, p) {
			continue
		}
		po := PassedOver{Candidate: candidate(p), Why: unneeded}
		if d, ok := firstDistance[p]; ok {
			po.Why, po.Distance = whyNotCloser, &d
		}
		out.passed = append(out.passed, po)
	}
	return out, nil
}

// notPreemptable says why preemptor may not preempt pod: pod is critical
// too, or not of a lower priority.
func notPreemptable(preemptor, pod *v1.Pod) string {
	why := "it is not critical"
	if v1helper.IsCriticalPod(pod) {
		why = "it is critical (" + criticalBecause(pod) + ")"
	}
	if preemptor.Spec.Priority == nil || pod.Spec.Priority == nil {
		return why + " and one of the two pods has no priority"
	}
	return fmt.Sprintf("%s and its priority (%d) is not below the preempting pod's (%d)", why, *pod.Spec.Priority, *preemptor.Spec.Priority)
}

func criticalBecause(pod *v1.Pod) string {
	switch {
	case v1helper.IsStaticPod(pod):
		return "a static pod"
	case v1helper.IsMirrorPod(pod):
		return "a mirror pod"
	default:
		return fmt.Sprintf("priority %d ≥ %d", *pod.Spec.Priority, v1helper.SystemCriticalPriority)
	}
}

// candidate describes p. It shares p's requests, which are never
// changed: explaining a choice among a thousand pods copies nothing.
func candidate(p *PodInfo) Candidate {
	return Candidate{Pod: p.key(), UID: p.Pod.UID, QOS: p.QOS, Requests: p.Requests}
}

func concat(lists ...[]*PodInfo) []*PodInfo {
	var out []*PodInfo
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
