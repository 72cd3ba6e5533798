// Package statussync brings berth's pods into the API server, as the
// kubelet's status manager and mirror client do: each pod's status through
// the status subresource when it changed, a mirror pod for each static pod,
// and the final deletion of a pod deleted through the API server once it
// stopped. What to do is decided by pure functions over plain data (this
// file); the Syncer carries it out.
package statussync

import (
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/v1helper"
)

// Plan is one pass's work.
type Plan struct {
	// Patches are status updates: the API server's pod (UID, status) and
	// the status it should have.
	Patches []Patch
	// CreateMirrors are mirror pods to create, DeleteMirrors those to
	// remove (stale: their static pod changed or is gone).
	CreateMirrors []*v1.Pod
	DeleteMirrors []*v1.Pod
	// Delete are pods deleted through the API server that have stopped:
	// their final deletion (grace 0).
	Delete []*v1.Pod
	// Forget are the final statuses berth keeps of stopped pods that the
	// API server no longer has: nothing is left to post them to.
	Forget []types.UID
}

// Patch is one status to post.
type Patch struct {
	Pod *v1.Pod // the API server's pod, as the informer has it
	// Status is what the pod's status should be: Berth merged with the
	// conditions berth does not own.
	Status v1.PodStatus
	// Berth is berth's own status of the pod. The Syncer merges it again
	// with the pod it reads fresh before posting: the informer's copy may
	// be older than what the API server has (see Syncer.patch).
	Berth v1.PodStatus
}

// Inputs is what a pass decides from.
type Inputs struct {
	// Node is the node's name and UID, the mirror pods' owner.
	NodeName string
	NodeUID  types.UID
	// Berth is every pod berth has a status for (its workers' view).
	Berth []v1.Pod
	// Static is every static pod berth wants; StaticKnown is false until
	// the sources have been read, when no mirror may be deleted.
	Static      []*v1.Pod
	StaticKnown bool
	// API is every pod the API server binds to this node, mirrors included.
	API []*v1.Pod
	// Stopped reports a pod berth no longer runs anything of (no worker,
	// nothing in the runtime).
	Stopped func(types.UID) bool
	// Sent is the last status posted for each API pod UID.
	Sent map[types.UID]v1.PodStatus
}

// Decide is the pass's plan.
func Decide(in Inputs) Plan {
	var p Plan
	api := map[string]*v1.Pod{}
	for _, pod := range in.API {
		api[pod.Namespace+"/"+pod.Name] = pod
	}

	// Mirror pods: one per wanted static pod, with its hash.
	wantMirror := map[string]bool{}
	for _, st := range in.Static {
		k := st.Namespace + "/" + st.Name
		wantMirror[k] = true
		m := api[k]
		switch {
		case m == nil:
			p.CreateMirrors = append(p.CreateMirrors, MirrorOf(st, in.NodeName, in.NodeUID))
		case !v1helper.IsMirrorPod(m):
			// An API pod took the name; the static pod runs, unmirrored.
		case m.DeletionTimestamp == nil && m.Annotations[v1helper.ConfigMirrorAnnotationKey] != configHash(st):
			p.DeleteMirrors = append(p.DeleteMirrors, m)
		}
	}
	for _, m := range in.API {
		if !v1helper.IsMirrorPod(m) {
			continue
		}
		// A mirror someone deleted is finished off at once (nothing of it
		// runs) and made again on the next pass, as the kubelet does.
		if m.DeletionTimestamp != nil || (in.StaticKnown && !wantMirror[m.Namespace+"/"+m.Name]) {
			p.DeleteMirrors = append(p.DeleteMirrors, m)
		}
	}

	// Statuses: a static pod's goes to its mirror, an API pod's to itself.
	for i := range in.Berth {
		b := &in.Berth[i]
		target := api[b.Namespace+"/"+b.Name]
		if target == nil {
			continue
		}
		if v1helper.IsStaticPod(b) {
			if !v1helper.IsMirrorPod(target) || target.Annotations[v1helper.ConfigMirrorAnnotationKey] != configHash(b) {
				continue
			}
		} else if target.UID != b.UID {
			continue // a pod of `berth apply`, or another pod's namesake
		}
		next := Merge(target.Status, b.Status)
		if apiequality.Semantic.DeepEqual(next, target.Status) {
			continue
		}
		if sent, ok := in.Sent[target.UID]; ok && apiequality.Semantic.DeepEqual(sent, next) {
			continue // posted; the informer has not caught up
		}
		p.Patches = append(p.Patches, Patch{Pod: target, Status: next, Berth: b.Status})
	}

	// Final deletion of pods that were deleted and have stopped.
	for _, pod := range in.API {
		if pod.DeletionTimestamp == nil || v1helper.IsMirrorPod(pod) {
			continue
		}
		if !in.Stopped(pod.UID) {
			continue
		}
		p.Delete = append(p.Delete, pod)
	}
	p.Forget = forgotten(in)
	return p
}

// forgotten lists the pods of the API server whose final status berth
// keeps after they stopped (the kubelet's status manager keeps it until
// the pod is gone) and that the API server no longer has.
func forgotten(in Inputs) []types.UID {
	live := map[types.UID]bool{}
	for _, pod := range in.API {
		live[pod.UID] = true
	}
	var out []types.UID
	for i := range in.Berth {
		b := &in.Berth[i]
		if !v1helper.IsStaticPod(b) && !live[b.UID] && in.Stopped(b.UID) {
			out = append(out, b.UID)
		}
	}
	return out
}

// configHash is a static pod's content hash, which its mirror carries.
func configHash(pod *v1.Pod) string {
	if h := pod.Annotations[v1helper.ConfigHashAnnotationKey]; h != "" {
		return h
	}
	return string(pod.UID)
}

// MirrorOf is the mirror pod of a static pod: its spec on this node, owned
// by the Node, marked with the static pod's hash. It uses no service
// account: the Node authorizer lets a node create only pods that reference
// no API objects.
func MirrorOf(static *v1.Pod, nodeName string, nodeUID types.UID) *v1.Pod {
	m := &v1.Pod{Spec: *static.Spec.DeepCopy()}
	m.Name, m.Namespace = static.Name, static.Namespace
	m.Labels = static.Labels
	m.Annotations = map[string]string{}
	for k, v := range static.Annotations {
		m.Annotations[k] = v
	}
	m.Annotations[v1helper.ConfigMirrorAnnotationKey] = configHash(static)
	m.Spec.NodeName = nodeName
	m.Spec.ServiceAccountName = ""
	m.Spec.DeprecatedServiceAccount = ""
	m.Spec.AutomountServiceAccountToken = nil
	controller := true
	m.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: nodeName, UID: nodeUID, Controller: &controller,
	}}
	return m
}

// ownedByKubelet reports the pod conditions the kubelet owns; the others
// (PodScheduled from the scheduler, DisruptionTarget from a controller,
// readiness gates) are kept as the API server has them.
func ownedByKubelet(t v1.PodConditionType) bool {
	switch t {
	case v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodReadyToStartContainers,
		v1.PodResizePending, v1.PodResizeInProgress:
		return true
	}
	return false
}

// Merge is the status to post: berth's, with the conditions berth does not
// own and the claim statuses kept from the API server's (the kubelet's
// mergePodStatus). The resource claim controller and the scheduler write
// the claim statuses; a patch that dropped them would be refused whole by
// the NodeRestriction admission ("cannot update resource claim statuses").
func Merge(api, berth v1.PodStatus) v1.PodStatus {
	out := *berth.DeepCopy()
	out.ResourceClaimStatuses = api.ResourceClaimStatuses
	out.ExtendedResourceClaimStatus = api.ExtendedResourceClaimStatus
	out.NodeAllocatableResourceClaimStatuses = api.NodeAllocatableResourceClaimStatuses
	has := map[v1.PodConditionType]bool{}
	for _, c := range out.Conditions {
		has[c.Type] = true
	}
	for _, c := range api.Conditions {
		if !has[c.Type] && !ownedByKubelet(c.Type) {
			out.Conditions = append(out.Conditions, c)
		}
	}
	return out
}
