package podobjects

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

func testService(namespace, name, ip string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Port: 443}}},
	}
}

func TestServices(t *testing.T) {
	cs := fake.NewClientset(
		testService("default", "kubernetes", "10.0.0.1"),
		testService("prod", "web", "10.0.0.2"),
		testService("prod", "db", "10.0.0.3"),
	)
	// The fake's watch does not replay what was created before it began:
	// the test creates a service only once the informer watches. The fake
	// holds its lock through the whole reaction chain, so the Create waits
	// for the tracker's watch that follows this reactor.
	watching := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor("services", func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil
	})

	s := NewServices(cs)
	if s.HasSynced() {
		t.Fatal("synced before Run")
	}
	added := make(chan string, 10)
	if _, err := s.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { added <- obj.(*v1.Service).Name },
	}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(runCtx)
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), s.HasSynced) {
		t.Fatal("services never synced")
	}

	prod, err := s.List("prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(prod) != 2 {
		t.Errorf("prod has %d services, want 2", len(prod))
	}
	for _, svc := range prod {
		if svc.Namespace != "prod" || svc.ManagedFields != nil {
			t.Errorf("service %s/%s, managedFields %v: want prod's, stripped", svc.Namespace, svc.Name, svc.ManagedFields)
		}
	}
	if none, err := s.List("empty"); err != nil || len(none) != 0 {
		t.Errorf("a namespace without services: %v, %v", none, err)
	}

	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the informer never watched")
	}
	if _, err := cs.CoreV1().Services("prod").Create(ctx, testService("prod", "cache", "10.0.0.4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The handler runs after the cache has the object.
	waitFor(ctx, t, added, "cache")
	if prod, _ := s.List("prod"); len(prod) != 3 {
		t.Errorf("after a create, prod has %d services, want 3", len(prod))
	}

	stop()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Run did not return after its context ended")
	}
}

// waitFor reads names from ch until want comes.
func waitFor(ctx context.Context, t *testing.T, ch <-chan string, want string) {
	t.Helper()
	for {
		select {
		case name := <-ch:
			if name == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no %q added", want)
		}
	}
}

// The transform is idempotent and leaves objects without metadata alone.
func TestStripManagedFields(t *testing.T) {
	svc := testService("a", "b", "10.0.0.1")
	for range 2 {
		out, err := stripManagedFields(svc)
		if err != nil || out.(*v1.Service).ManagedFields != nil {
			t.Fatalf("stripManagedFields = %v, %v", out, err)
		}
	}
	tomb := toolscache.DeletedFinalStateUnknown{Key: "a/b", Obj: svc}
	if out, err := stripManagedFields(tomb); err != nil || out != any(tomb) {
		t.Errorf("a tombstone: %v, %v", out, err)
	}
}
