package admission

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// benchPods are 1,000 pods as a crowded node might hold them: a tenth
// static, 30% BestEffort, 40% Burstable of assorted sizes, 20% Guaranteed,
// each Burstable one on a host port of its own.
func benchPods() []*PodInfo {
	pods := make([]*PodInfo, 1000)
	for i := range pods {
		name := fmt.Sprintf("p%04d", i)
		var p *v1.Pod
		switch i % 10 {
		case 0:
			p = newPod(name, static(), guaranteed("100m", "128Mi"))
		case 1, 2, 3:
			p = newPod(name, priority(int32(i%7)))
		case 4, 5, 6, 7:
			p = newPod(name, priority(int32(i%7)),
				burstable(fmt.Sprintf("%dm", 10*(1+i%7)), fmt.Sprintf("%dMi", 32*(1+i%5))),
				withHostPort(int32(10000+i), "", ""))
		default:
			p = newPod(name, guaranteed(fmt.Sprintf("%dm", 25*(1+i%4)), fmt.Sprintf("%dMi", 64*(1+i%3))))
		}
		pods[i] = NewPodInfo(p)
	}
	return pods
}

// BenchmarkChoosePreemptionVictims1000 frees 250m, 512Mi and 5 pod slots,
// which takes five Burstable pods (and their slots spare the BestEffort
// ones). Most of the cost is the explanation of the other 995.
func BenchmarkChoosePreemptionVictims1000(b *testing.B) {
	pods := benchPods()
	preemptor := NewPodInfo(newPod("critical", priority(clusterCritical)))
	reqs := Requirements{{"cpu", 250}, {"memory", 512 * mi}, {"pods", 5}}
	p, err := choosePreemptionVictims(preemptor, pods, reqs)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := choosePreemptionVictims(preemptor, pods, reqs); err != nil {
			b.Fatal(err)
		}
	}
	// After the loop: it resets the reported metrics.
	b.ReportMetric(float64(len(p.Victims)), "victims")
}

// BenchmarkAdmit1000 admits one pod on a host port to a node holding 1,000
// pods: one that fits, one rejected, and a critical one that preempts.
func BenchmarkAdmit1000(b *testing.B) {
	pods := benchPods()
	for _, bc := range []struct {
		name    string
		maxPods string
		pod     *v1.Pod
		admit   bool
	}{
		{"fits", "1100", newPod("p", burstable("1", "1Gi"), withHostPort(80, "", "")), true},
		{"rejected", "1000", newPod("p", burstable("1", "1Gi"), withHostPort(80, "", "")), false},
		{"preempts", "1000", newPod("p", static(), burstable("16", "32Gi"), withHostPort(80, "", "")), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			node := Node{Node: newNode(nil, "cpu", "64", "memory", "128Gi", "pods", bc.maxPods), Active: pods}
			pod := NewPodInfo(bc.pod)
			if r := Admit(pod, node); r.Admit != bc.admit {
				b.Fatalf("Admit = %+v", r)
			}
			for b.Loop() {
				Admit(pod, node)
			}
		})
	}
}
