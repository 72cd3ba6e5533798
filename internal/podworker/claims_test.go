package podworker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeClaims is a DRA manager that records what the worker asked of it,
// in order with the runtime's calls it sees through rt.
type fakeClaims struct {
	mu         sync.Mutex
	prepareErr error
	checkErr   error
	calls      []string
	// running counts the pod's running containers at each unprepare.
	runningAtUnprepare []int
	e                  *execEnv
}

func (f *fakeClaims) PrepareResources(_ context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "prepare "+string(pod.UID))
	return f.prepareErr
}

func (f *fakeClaims) CheckResources(_ context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "check "+string(pod.UID))
	return f.checkErr
}

func (f *fakeClaims) UnpreparePod(ctx context.Context, uid types.UID) error {
	st, err := f.e.rt.PodStatus(ctx, uid)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "unprepare "+string(uid))
	f.runningAtUnprepare = append(f.runningAtUnprepare, len(st.ActiveContainers()))
	return nil
}

// ContainerCDIDevices gives a device per claim c references and per
// request of the pod's extended resource claim mapped to c.
func (f *fakeClaims) ContainerCDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error) {
	var out []string
	for _, r := range c.Resources.Claims {
		out = append(out, "test-driver.cdi.k8s.io/test=claim-"+r.Name)
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		for _, m := range st.RequestMappings {
			if m.ContainerName == c.Name {
				out = append(out, "test-driver.cdi.k8s.io/test="+m.RequestName)
			}
		}
	}
	return out, nil
}

func claimPod() *v1.Pod {
	pod := execPod("app", "plain")
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return pod
}

// A pod's claims are prepared before its sandbox; a failure there creates
// nothing, posts the kubelet's FailedPrepareDynamicResources and is tried
// again after a back-off that grows; once prepared, the container that
// references the claim gets its CDI devices and the other none; the
// claims are unprepared once the containers have stopped.
func TestExecutePreparesClaims(t *testing.T) {
	e := newExecEnv(t, claimPod())
	claims := &fakeClaims{e: e, prepareErr: errors.New("driver test-driver.cdi.k8s.io is not registered")}
	e.w.ws.deps.DynamicResources = claims

	first := e.sync()
	checkCalls(t, "calls when the claims cannot be prepared", mutations(e.rt), nil)
	want := "Warning FailedPrepareDynamicResources Failed to prepare dynamic resources: driver test-driver.cdi.k8s.io is not registered"
	if !slices.Contains(e.events.list(), want) {
		t.Errorf("events %q lack %q", e.events.list(), want)
	}
	e.clk.Step(first)
	second := e.sync()
	if first <= 0 || second <= first {
		t.Errorf("retries after %v then %v, want a back-off that grows", first, second)
	}

	claims.prepareErr = nil
	e.clk.Step(second)
	e.sync()
	checkCalls(t, "calls once prepared", mutations(e.rt),
		[]string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app", "StartContainer", "CreateContainer plain", "StartContainer"})
	cfg := e.rt.ContainerConfig(e.containerID(t, "app"))
	if len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "test-driver.cdi.k8s.io/test=claim-gpu" {
		t.Errorf("app's CDI devices %v", cfg.CDIDevices)
	}
	if cfg := e.rt.ContainerConfig(e.containerID(t, "plain")); len(cfg.CDIDevices) != 0 {
		t.Errorf("plain got CDI devices %v", cfg.CDIDevices)
	}

	if err := e.w.terminate(context.Background(), e.pod, e.w.ws.deps.Log); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(claims.calls, []string{"prepare u1", "prepare u1", "prepare u1", "unprepare u1"}) {
		t.Errorf("claims calls %q", claims.calls)
	}
	if !slices.Equal(claims.runningAtUnprepare, []int{0}) {
		t.Errorf("running containers at unprepare %v, want none", claims.runningAtUnprepare)
	}
}

// A pod with no spec.resourceClaims whose extended resources the
// scheduler allocated through DRA has its claim prepared before the
// sandbox, and the container the requests are mapped to gets their CDI
// devices (the other none).
func TestExecutePreparesExtendedResourceClaim(t *testing.T) {
	pod := execPod("app", "plain")
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "u1-extended-resources",
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "app", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
	e := newExecEnv(t, pod)
	claims := &fakeClaims{e: e}
	e.w.ws.deps.DynamicResources = claims
	e.sync()
	checkCalls(t, "calls", mutations(e.rt),
		[]string{"RunPodSandbox u1", "PullImage busybox", "CreateContainer app", "StartContainer", "CreateContainer plain", "StartContainer"})
	if !slices.Equal(claims.calls, []string{"prepare u1"}) {
		t.Errorf("claims calls %q", claims.calls)
	}
	cfg := e.rt.ContainerConfig(e.containerID(t, "app"))
	if len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "test-driver.cdi.k8s.io/test=container-0-request-0" {
		t.Errorf("app's CDI devices %v", cfg.CDIDevices)
	}
	if cfg := e.rt.ContainerConfig(e.containerID(t, "plain")); len(cfg.CDIDevices) != 0 {
		t.Errorf("plain got CDI devices %v", cfg.CDIDevices)
	}
}

// A pod that waits for the terminating pod of its name it replaces (force
// deleted, made again with a claim of the same name) says why its claims
// cannot be prepared, with the kubelet's event, at each sync of the wait;
// it prepares nothing and makes no sandbox until the predecessor is gone.
func TestWaitForPredecessorExplainsClaims(t *testing.T) {
	e := newExecEnv(t, claimPod())
	msg := "prepare dynamic resources: old ResourceClaim with same name gpu-claim and different UID u0 still exists (previous pod force-deleted?!)"
	claims := &fakeClaims{e: e, checkErr: errors.New(msg)}
	e.w.ws.deps.DynamicResources = claims
	prev := newWorker(e.w.ws, "u0", e.pod.Name, e.pod.Namespace)
	prev.terminating = true
	e.w.ws.mu.Lock()
	e.w.ws.workers["u0"], e.w.ws.workers[e.pod.UID] = prev, e.w
	e.w.ws.mu.Unlock()

	if after := e.sync(); after != time.Minute {
		t.Errorf("waiting sync again after %v, want the resync", after)
	}
	e.clk.Step(time.Minute)
	e.sync()
	want := "Warning FailedPrepareDynamicResources Failed to prepare dynamic resources: " + msg
	if n := countOf(e.events.list(), want); n != 2 {
		t.Errorf("events %q: %q %d times, want once per sync", e.events.list(), want, n)
	}
	checkCalls(t, "calls while waiting", mutations(e.rt), nil)
	if !slices.Equal(claims.calls, []string{"check u1", "check u1"}) {
		t.Errorf("claims calls %q, want checks only", claims.calls)
	}

	e.w.ws.mu.Lock()
	delete(e.w.ws.workers, "u0")
	e.w.ws.mu.Unlock()
	claims.checkErr = nil
	e.sync()
	if !slices.Equal(claims.calls, []string{"check u1", "check u1", "prepare u1"}) {
		t.Errorf("claims calls once the predecessor is gone %q", claims.calls)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
