package statussync

import (
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func condition(t v1.PodConditionType) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: v1.ConditionTrue}
}

func hasCondition(s v1.PodStatus, t v1.PodConditionType) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// testSyncer is a Syncer of node n1 whose informer holds idx and whose
// only pod status is berth's.
func testSyncer(client *fake.Clientset, idx cache.Indexer, berth v1.Pod) *Syncer {
	return New(Options{
		Client: client, NodeName: "n1", Pods: corelisters.NewPodLister(idx),
		Statuses: func() []v1.Pod { return []v1.Pod{berth} },
		Static:   func() ([]*v1.Pod, bool) { return nil, true },
		Stopped:  never, Forget: func(uid types.UID) {},
		Clock: clocktesting.NewFakeClock(time.Now()), Log: slog.New(slog.DiscardHandler),
	})
}

// A condition posted a moment ago and removed now goes from the API
// server even while the informer's copy of the pod has not caught up with
// the post: the patch is built from the pod read fresh. Built from the
// informer's copy, which never had the condition, the patch left it on
// the API server for good (TestResizeCluster's PodResizeInProgress).
func TestPassRemovesAConditionTheInformerHasNotSeen(t *testing.T) {
	onServer := apiPod("rz", "u1")
	onServer.Spec.NodeName = "n1"
	onServer.Status = v1.PodStatus{Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{condition(v1.PodReady), condition(v1.PodResizeInProgress), condition(v1.PodScheduled)}}
	client := fake.NewClientset(onServer)

	// The informer's copy is from before the post that added the condition.
	stale := onServer.DeepCopy()
	stale.Status.Phase = v1.PodPending
	stale.Status.Conditions = []v1.PodCondition{condition(v1.PodScheduled)}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(stale); err != nil {
		t.Fatal(err)
	}
	berth := *onServer.DeepCopy()
	berth.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{condition(v1.PodReady)}}

	s := testSyncer(client, idx, berth)
	s.pass(t.Context())

	got, err := client.CoreV1().Pods("default").Get(t.Context(), "rz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasCondition(got.Status, v1.PodResizeInProgress) {
		t.Errorf("PodResizeInProgress is still on the API server: %+v", got.Status.Conditions)
	}
	if !hasCondition(got.Status, v1.PodScheduled) || !hasCondition(got.Status, v1.PodReady) {
		t.Errorf("lost a condition: %+v", got.Status.Conditions)
	}

	// The next pass, the informer still behind, posts nothing more.
	before := len(client.Actions())
	s.pass(t.Context())
	for _, a := range client.Actions()[before:] {
		if a.GetVerb() == "patch" {
			t.Errorf("posted again: %+v", a)
		}
	}
}

// A pod gone from the API server, or replaced by a namesake since the
// informer saw it, gets no patch.
func TestPassPostsNothingToANamesake(t *testing.T) {
	namesake := apiPod("rz", "u2")
	client := fake.NewClientset(namesake)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(apiPod("rz", "u1")); err != nil {
		t.Fatal(err)
	}
	berth := withStatus(apiPod("rz", "u1"), v1.PodRunning)
	s := testSyncer(client, idx, berth)
	s.pass(t.Context())
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("patched the namesake: %+v", a)
		}
	}
}
