package eventsink

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func event(name string, count int32, ns string) v1.Event {
	return v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web"},
		Reason:         "Started", Message: "Started container app", Count: count, Type: v1.EventTypeNormal,
	}
}

func verbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetNamespace())
	}
	return out
}

// A first occurrence is created in its object's namespace (the node's in
// default); a repeat patches the count; a repeat whose first occurrence never
// arrived is created whole.
func TestPost(t *testing.T) {
	client := fake.NewClientset()
	s := New(client, slog.New(slog.DiscardHandler))
	ctx := context.Background()

	s.post(ctx, event("web.1", 1, "shop"))
	s.post(ctx, event("web.1", 2, "shop"))
	node := event("n1.2", 1, "")
	node.InvolvedObject = v1.ObjectReference{Kind: "Node", Name: "n1"}
	s.post(ctx, node)
	s.post(ctx, event("web.3", 3, "shop")) // never created: the patch finds nothing

	want := []string{"create shop", "patch shop", "create default", "patch shop", "create shop"}
	if got := verbs(client); !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	e, err := client.CoreV1().Events("shop").Get(ctx, "web.1", metav1.GetOptions{})
	if err != nil || e.Count != 2 {
		t.Errorf("web.1 = %+v, %v; want count 2", e, err)
	}
	if _, err := client.CoreV1().Events("shop").Get(ctx, "web.3", metav1.GetOptions{}); err != nil {
		t.Errorf("web.3 was not created after its patch failed: %v", err)
	}
}

// The queue never blocks the recorder: past its bound, events are dropped.
func TestPutNeverBlocks(t *testing.T) {
	s := New(fake.NewClientset(), slog.New(slog.DiscardHandler))
	for i := range queueSize + 10 {
		s.Put(event("e", int32(i+1), "ns"))
	}
	if len(s.queue) != queueSize {
		t.Errorf("queued %d, want %d", len(s.queue), queueSize)
	}
}
