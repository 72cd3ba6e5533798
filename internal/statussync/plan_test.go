package statussync

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/v1helper"
)

func staticPod(name, hash string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(hash),
		Annotations: map[string]string{v1helper.ConfigSourceAnnotationKey: v1helper.FileSource,
			v1helper.ConfigHashAnnotationKey: hash}}}
	p.Spec.ServiceAccountName = "default"
	return p
}

func mirrorPod(name, hash, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid),
		Annotations: map[string]string{v1helper.ConfigMirrorAnnotationKey: hash}}}
}

func apiPod(name, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)}}
}

func withStatus(p *v1.Pod, phase v1.PodPhase) v1.Pod {
	c := *p.DeepCopy()
	c.Status.Phase = phase
	return c
}

func never(types.UID) bool  { return false }
func always(types.UID) bool { return true }

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestDecideMirrors(t *testing.T) {
	deleting := mirrorPod("c", "h3", "m3")
	now := metav1.NewTime(time.Now())
	deleting.DeletionTimestamp = &now
	in := Inputs{
		NodeName: "n1", NodeUID: "node-uid",
		Static:      []*v1.Pod{staticPod("a", "h1"), staticPod("b", "h2-new"), staticPod("c", "h3")},
		StaticKnown: true,
		API: []*v1.Pod{
			mirrorPod("b", "h2-old", "m2"), // stale: the manifest changed
			deleting,                       // deleted by a user: finished off
			mirrorPod("gone", "h9", "m9"),  // its static pod is gone
		},
		Stopped: never,
	}
	p := Decide(in)
	if got := names(p.CreateMirrors); len(got) != 1 || got[0] != "a" {
		t.Errorf("create = %v, want [a]", got)
	}
	if got := names(p.DeleteMirrors); len(got) != 3 {
		t.Errorf("delete = %v, want b, c, gone", got)
	}
	m := p.CreateMirrors[0]
	if m.Annotations[v1helper.ConfigMirrorAnnotationKey] != "h1" || m.Spec.NodeName != "n1" ||
		m.Spec.ServiceAccountName != "" || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "node-uid" ||
		m.OwnerReferences[0].Kind != "Node" || m.UID != "" {
		t.Errorf("mirror = %+v", m)
	}

	// Before the sources are read, no mirror is taken for unwanted.
	in.StaticKnown, in.Static = false, nil
	in.API = []*v1.Pod{mirrorPod("gone", "h9", "m9")}
	if p := Decide(in); len(p.DeleteMirrors) != 0 {
		t.Errorf("deleted %v before the sources were read", names(p.DeleteMirrors))
	}
}

func TestDecideStatuses(t *testing.T) {
	api := apiPod("web", "u1")
	api.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}}
	static := staticPod("s", "h1")
	mirror := mirrorPod("s", "h1", "m1")
	in := Inputs{
		Berth: []v1.Pod{withStatus(api, v1.PodRunning), withStatus(static, v1.PodRunning),
			withStatus(apiPod("applied", "local"), v1.PodRunning)},
		API:     []*v1.Pod{api, mirror, apiPod("applied", "other-uid")},
		Stopped: never,
		Sent:    map[types.UID]v1.PodStatus{},
	}
	p := Decide(in)
	if len(p.Patches) != 2 {
		t.Fatalf("patches = %d, want the API pod's and the mirror's", len(p.Patches))
	}
	byUID := map[types.UID]Patch{}
	for _, pt := range p.Patches {
		byUID[pt.Pod.UID] = pt
	}
	web, ok := byUID["u1"]
	// The scheduler's and a controller's conditions stay.
	if !ok || web.Status.Phase != v1.PodRunning || len(web.Status.Conditions) != 2 {
		t.Errorf("web patch = %+v", web.Status)
	}
	if _, ok := byUID["m1"]; !ok {
		t.Error("the static pod's status did not go to its mirror")
	}

	// Already posted and the informer lags: nothing to send again.
	in.Sent = map[types.UID]v1.PodStatus{"u1": web.Status, "m1": byUID["m1"].Status}
	if p := Decide(in); len(p.Patches) != 0 {
		t.Errorf("re-sent %d statuses", len(p.Patches))
	}
}

func TestMergeKeepsOthersConditions(t *testing.T) {
	api := v1.PodStatus{Conditions: []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		{Type: v1.DisruptionTarget, Status: v1.ConditionTrue},
		{Type: v1.PodReady, Status: v1.ConditionTrue},
	}}
	berth := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}}
	got := Merge(api, berth)
	types := map[v1.PodConditionType]v1.ConditionStatus{}
	for _, c := range got.Conditions {
		types[c.Type] = c.Status
	}
	if types[v1.PodReady] != v1.ConditionFalse || types[v1.PodScheduled] != v1.ConditionTrue ||
		types[v1.DisruptionTarget] != v1.ConditionTrue || len(got.Conditions) != 3 {
		t.Errorf("merged conditions = %v", got.Conditions)
	}
}

// The claim statuses are the controllers': kept as the API server has them,
// whatever berth's own status says.
func TestMergeKeepsClaimStatuses(t *testing.T) {
	name := "pod-gpu-abc12"
	api := v1.PodStatus{
		ResourceClaimStatuses:       []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}},
		ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "pod-extended-resources-x"},
		NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{
			{ResourceClaimName: "pod-node-x"},
		},
	}
	berth := v1.PodStatus{Phase: v1.PodRunning}
	got := Merge(api, berth)
	if !apiequality.Semantic.DeepEqual(got.ResourceClaimStatuses, api.ResourceClaimStatuses) ||
		!apiequality.Semantic.DeepEqual(got.ExtendedResourceClaimStatus, api.ExtendedResourceClaimStatus) ||
		!apiequality.Semantic.DeepEqual(got.NodeAllocatableResourceClaimStatuses, api.NodeAllocatableResourceClaimStatuses) {
		t.Errorf("merged claim statuses = %+v, %+v, %+v; want the API server's", got.ResourceClaimStatuses,
			got.ExtendedResourceClaimStatus, got.NodeAllocatableResourceClaimStatuses)
	}
	if got.Phase != v1.PodRunning {
		t.Errorf("phase = %s, want berth's", got.Phase)
	}
}

func TestDecideFinalDelete(t *testing.T) {
	now := metav1.NewTime(time.Now())
	stopped, running := apiPod("stopped", "u1"), apiPod("running", "u2")
	stopped.DeletionTimestamp, running.DeletionTimestamp = &now, &now
	alive := apiPod("alive", "u3")
	in := Inputs{
		Berth:   []v1.Pod{withStatus(running, v1.PodRunning)},
		API:     []*v1.Pod{stopped, running, alive},
		Stopped: func(uid types.UID) bool { return uid != "u2" },
	}
	if got := names(Decide(in).Delete); len(got) != 1 || got[0] != "stopped" {
		t.Errorf("delete = %v, want [stopped]", got)
	}
	in.Stopped = never // the runtime still has something of it
	if got := Decide(in).Delete; len(got) != 0 {
		t.Errorf("deleted %v while the runtime has it", names(got))
	}
}

// A deleted pod's final status is posted before its final deletion, in the
// same pass, and forgotten once the API server no longer has the pod.
func TestDecideFinalStatusThenForget(t *testing.T) {
	now := metav1.NewTime(time.Now())
	gone := apiPod("gone", "u1")
	gone.DeletionTimestamp = &now
	final := withStatus(gone, v1.PodSucceeded)
	static := withStatus(staticPod("static", "h1"), v1.PodRunning)
	running := withStatus(apiPod("running", "u3"), v1.PodRunning)
	in := Inputs{
		Berth:   []v1.Pod{final, static, running},
		API:     []*v1.Pod{gone},
		Stopped: func(uid types.UID) bool { return uid != "u3" },
	}
	plan := Decide(in)
	if len(plan.Patches) != 1 || plan.Patches[0].Status.Phase != v1.PodSucceeded || names(plan.Delete)[0] != "gone" {
		t.Errorf("want the final status posted and the pod deleted: %+v", plan)
	}
	if len(plan.Forget) != 0 {
		t.Errorf("forgot %v while the API server still has the pod", plan.Forget)
	}
	in.API = nil // the deletion went through
	if got := Decide(in).Forget; len(got) != 1 || got[0] != "u1" {
		t.Errorf("forget = %v, want [u1]: not the static pod's, not a running pod's", got)
	}
}
