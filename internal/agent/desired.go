package agent

import (
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/podsource"
)

// reasonOutOfPods is the kubelet's rejection reason for a pod beyond maxPods.
const reasonOutOfPods = "OutOfpods"

// podEntry is one desired pod, keyed by namespace/name.
type podEntry struct {
	pod *v1.Pod
	// rejected is why the pod was not admitted, or "" when it runs.
	rejected string
}

// desiredSet is the pods the manifests want, by namespace/name.
type desiredSet map[string]*podEntry

// admit builds the desired set of a snapshot: pods in the snapshot's order
// (namespace/name) up to maxPods run, the rest are rejected.
func admit(snap podsource.Snapshot, maxPods int) desiredSet {
	out := desiredSet{}
	admitted := 0
	for _, pod := range snap.Pods {
		e := &podEntry{pod: pod}
		if admitted >= maxPods {
			e.rejected = reasonOutOfPods
		} else {
			admitted++
		}
		out[key(pod)] = e
	}
	return out
}

// changes is what moving from one desired set to the next means for the
// pod workers.
type changes struct {
	start []*v1.Pod // new UIDs: a new manifest, or an edited one
	kill  []*v1.Pod // UIDs no longer wanted: a deleted or edited manifest
}

// diff compares two desired sets by UID, the static pod's content hash: an
// edited manifest is one kill and one start.
func diff(prev, next desiredSet) changes {
	running := func(s desiredSet) map[string]*v1.Pod {
		m := map[string]*v1.Pod{}
		for _, e := range s {
			if e.rejected == "" {
				m[string(e.pod.UID)] = e.pod
			}
		}
		return m
	}
	before, after := running(prev), running(next)
	var c changes
	for uid, pod := range before {
		if _, ok := after[uid]; !ok {
			c.kill = append(c.kill, pod)
		}
	}
	for uid, pod := range after {
		if _, ok := before[uid]; !ok {
			c.start = append(c.start, pod)
		}
	}
	sortPods(c.kill)
	sortPods(c.start)
	return c
}
