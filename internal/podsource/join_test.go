package podsource

import (
	"context"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/berth-dev/berth/internal/v1helper"
)

func joinPod(name, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)}}
}

func podNamesUIDs(s Snapshot) []string {
	var out []string
	for _, p := range s.Pods {
		out = append(out, p.Name+"/"+string(p.UID))
	}
	return out
}

func receive(t *testing.T, ch <-chan Snapshot) Snapshot {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot")
	}
	return Snapshot{}
}

// The node's own pods go out at once, marked Incomplete until the API
// server has spoken; a name both use stays the node's.
func TestJoinCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	local, cluster, out := make(chan Snapshot), make(chan Snapshot), make(chan Snapshot)
	go JoinCluster(ctx, local, cluster, out, slog.New(slog.DiscardHandler))

	local <- Snapshot{Pods: []*v1.Pod{joinPod("static", "s1")}}
	first := receive(t, out)
	if !first.Incomplete || len(first.Pods) != 1 {
		t.Fatalf("first = %+v, want the static pod, incomplete", first)
	}
	cluster <- Snapshot{Pods: []*v1.Pod{joinPod("web", "a1"), joinPod("static", "a2")}}
	second := receive(t, out)
	if second.Incomplete {
		t.Error("still incomplete after the API server's snapshot")
	}
	if got, want := podNamesUIDs(second), []string{"static/s1", "web/a1"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("pods = %v, want %v", got, want)
	}
}

// The API server's source sends the node's pods once listed, mirror pods
// left out and the rest marked as the API server's.
func TestAPIServerSource(t *testing.T) {
	mirror := joinPod("static-n1", "m1")
	mirror.Annotations = map[string]string{v1helper.ConfigMirrorAnnotationKey: "h"}
	client := fake.NewClientset(joinPod("web", "a1"), mirror)
	factory := informers.NewSharedInformerFactory(client, 0)
	src, err := NewAPIServer(factory.Core().V1().Pods().Informer())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer factory.Shutdown() // after cancel: it waits for the informers to stop
	defer cancel()
	out := make(chan Snapshot)
	go src.Run(ctx, out)
	s := receive(t, out)
	if len(s.Pods) != 1 || s.Pods[0].Name != "web" || s.Pods[0].Annotations[ConfigSourceAnnotationKey] != v1helper.ApiserverSource {
		t.Fatalf("snapshot = %v", podNamesUIDs(s))
	}
	// A deletion with a grace period is a change the loop must see.
	deleting := joinPod("web", "a1")
	now, grace := metav1.Now(), int64(5)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds, deleting.ResourceVersion = &now, &grace, "2"
	if _, err := client.CoreV1().Pods("default").Update(ctx, deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = receive(t, out)
	if len(s.Pods) != 1 || s.Pods[0].DeletionTimestamp == nil {
		t.Errorf("after the deletion: %+v", s.Pods)
	}
}
