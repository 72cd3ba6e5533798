package status

import (
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func podNamed(ns, name, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

func TestManager(t *testing.T) {
	m := NewManager()
	if _, ok := m.Get("nope"); ok {
		t.Fatal("Get on an empty manager found something")
	}
	web := podNamed("default", "web", "u1")
	st := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}}
	m.Set(web, st)
	m.Set(podNamed("kube-system", "dns", "u2"), v1.PodStatus{Phase: v1.PodPending})
	m.Set(podNamed("default", "api", "u3"), v1.PodStatus{Phase: v1.PodSucceeded})

	// The manager owns copies: later changes by the writer do not leak in.
	web.Name = "changed"
	st.ContainerStatuses[0].Name = "changed"

	got, ok := m.Get("u1")
	if !ok || got.Phase != v1.PodRunning || got.ContainerStatuses[0].Name != "app" {
		t.Fatalf("Get(u1) = %+v, %v", got, ok)
	}
	// Nor do changes by a reader.
	got.ContainerStatuses[0].Name = "mutated"
	if again, _ := m.Get("u1"); again.ContainerStatuses[0].Name != "app" {
		t.Errorf("Get returned shared memory")
	}

	pods := m.Pods()
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name+"="+string(p.Status.Phase))
	}
	mustEqual(t, "Pods", names, []string{"default/api=Succeeded", "default/web=Running", "kube-system/dns=Pending"})
	pods[1].Status.Phase = v1.PodFailed
	if again, _ := m.Get("u1"); again.Phase != v1.PodRunning {
		t.Errorf("Pods returned shared memory")
	}

	m.Delete("u1")
	if _, ok := m.Get("u1"); ok || len(m.Pods()) != 2 {
		t.Errorf("u1 still there after Delete")
	}
}

// The claims the control plane made for a pod stay in its recorded status
// whatever status the node worked out: they are the API server's, and the
// pod-resources API names the pod's claims from them.
func TestManagerKeepsClaimStatuses(t *testing.T) {
	m := NewManager()
	pod := podNamed("ml", "train", "u1")
	pod.Status = v1.PodStatus{
		Phase:                       v1.PodPending,
		ResourceClaimStatuses:       []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("train-gpu-x")}},
		ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "train-extended-resources-y"},
	}
	m.Set(pod, v1.PodStatus{Phase: v1.PodRunning})
	got := m.Pods()[0].Status
	if got.Phase != v1.PodRunning || len(got.ResourceClaimStatuses) != 1 || *got.ResourceClaimStatuses[0].ResourceClaimName != "train-gpu-x" ||
		got.ExtendedResourceClaimStatus == nil || got.ExtendedResourceClaimStatus.ResourceClaimName != "train-extended-resources-y" {
		t.Errorf("recorded status %+v", got)
	}
	pod.Status.ExtendedResourceClaimStatus.ResourceClaimName = "changed"
	if m.Pods()[0].Status.ExtendedResourceClaimStatus.ResourceClaimName != "train-extended-resources-y" {
		t.Error("the recorded claim status shares memory with the writer's pod")
	}
}

// TestManagerConcurrent is meant for -race: writers and readers at once.
func TestManagerConcurrent(t *testing.T) {
	m := NewManager()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		uid := types.UID(rune('a' + i))
		go func() {
			defer wg.Done()
			for range 100 {
				m.Set(podNamed("ns", string(uid), string(uid)), v1.PodStatus{Phase: v1.PodRunning})
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				m.Get(uid)
				m.Pods()
			}
		}()
	}
	wg.Wait()
	if n := len(m.Pods()); n != 4 {
		t.Errorf("%d pods, want 4", n)
	}
}
