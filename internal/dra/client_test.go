package dra

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestAPIClaims: the manager reads claims through client-go.
func TestAPIClaims(t *testing.T) {
	client := fake.NewClientset(testClaim("c1", "u-c1", []string{gpuDriver}, "p1"))
	plugins := NewPlugins(testLog(t), 0)
	t.Cleanup(plugins.Close)
	m, err := New(Options{Dir: t.TempDir(), Claims: APIClaims{Client: client}, Plugins: plugins, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, plugins, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pod := testPod("p1", []v1.PodResourceClaim{named("c", "c1"), named("m", "missing")}, nil)
	if err := m.PrepareResources(ctx, pod); errString(err) != `prepare dynamic resources: fetch ResourceClaim missing: resourceclaims.resource.k8s.io "missing" not found` {
		t.Fatalf("error %v", err)
	}
	pod.Spec.ResourceClaims = pod.Spec.ResourceClaims[:1]
	if err := m.PrepareResources(ctx, pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"c1"}, nil)
}
