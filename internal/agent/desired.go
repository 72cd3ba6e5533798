package agent

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/podsource"
)

// podEntry is one desired pod, keyed by namespace/name.
type podEntry struct {
	pod *v1.Pod
	// rejected is set when the pod was not admitted: it never runs.
	rejected *admission.Result
	// preempting are the pods being preempted to make room for this one:
	// it starts once they have stopped.
	preempting []types.UID
}

// runs reports whether the pod is admitted and not being deleted: running,
// or about to.
func (e *podEntry) runs() bool { return e.rejected == nil && e.pod.DeletionTimestamp == nil }

// desiredSet is the pods the sources want, by namespace/name.
type desiredSet map[string]*podEntry

// desiredFrom builds the desired set of a snapshot, keeping what prev
// decided about the pods it already had (same UID): a pod is admitted once.
func desiredFrom(snap podsource.Snapshot, prev desiredSet) desiredSet {
	out := desiredSet{}
	for _, pod := range snap.Pods {
		e := &podEntry{pod: pod}
		if p := prev[key(pod)]; p != nil && p.pod.UID == pod.UID {
			e.rejected, e.preempting = p.rejected, p.preempting
		}
		out[key(pod)] = e
	}
	return out
}

// changes is what moving from one desired set to the next means for the
// pod workers.
type changes struct {
	start  []*v1.Pod // new UIDs: a new manifest, or an edited one
	kill   []*v1.Pod // UIDs no longer wanted: a deleted or edited manifest, a pod being deleted
	update []*v1.Pod // the API server changed a running pod (a new resourceVersion)
}

// diff compares two desired sets by UID, the static pod's content hash: an
// edited manifest is one kill and one start. A pod waiting for the pods it
// preempts is not started yet. A pod of the API server keeps its UID: a new
// version is an update, and one with a deletion timestamp is killed as that
// version says (its deletion grace period).
func diff(prev, next desiredSet) changes {
	admitted := func(s desiredSet) map[types.UID]*podEntry {
		m := map[types.UID]*podEntry{}
		for _, e := range s {
			if e.runs() {
				m[e.pod.UID] = e
			}
		}
		return m
	}
	before, after := admitted(prev), admitted(next)
	latest := map[types.UID]*v1.Pod{}
	for _, e := range next {
		latest[e.pod.UID] = e.pod
	}
	var c changes
	for uid, e := range before {
		if n, ok := after[uid]; ok {
			if !podsource.SameContent(n.pod, e.pod) {
				c.update = append(c.update, n.pod)
			}
			continue
		}
		pod := e.pod
		if p, ok := latest[uid]; ok {
			pod = p
		}
		c.kill = append(c.kill, pod)
	}
	for uid, e := range after {
		if _, ok := before[uid]; !ok && len(e.preempting) == 0 {
			c.start = append(c.start, e.pod)
		}
	}
	sortPods(c.kill)
	sortPods(c.start)
	sortPods(c.update)
	return c
}

// admissionOrder is the order new pods are admitted in, the kubelet's:
// oldest first, then by name so that a batch of manifests (which have no
// creation time) is admitted the same way every time.
func admissionOrder(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return key(pods[i]) < key(pods[j])
	})
}
