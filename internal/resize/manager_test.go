package resize

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
)

// A resize admitted before a restart of berth is still the allocation
// after it, its actuated resources too: nothing is forgotten or applied
// twice. A resize that does not fit leaves the allocation and shows
// PodResizePending; once it fits it is admitted and PodResizeInProgress
// lasts until Settle.
func TestManagerCheckpoint(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	node := Node{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourcePods: resource.MustParse("10")}}
	m, err := Open(dir, clk)
	if err != nil {
		t.Fatal(err)
	}
	pod := podWith("p", res("100m", "100m", "", ""))
	pod.Generation = 1
	if got, _, err := m.Sync(pod, node); err != nil || got != pod {
		t.Fatalf("first Sync = %v, %v", got, err)
	}
	if err := m.SetActuated(pod.UID, "c0", "id0", pod.Spec.Containers[0].Resources); err != nil {
		t.Fatal(err)
	}

	big := withCPU(pod, "2")
	big.Generation = 2
	got, out, err := m.Sync(big, node)
	if err != nil || out.Pending == nil || out.Pending.Reason != ReasonDeferred {
		t.Fatalf("Sync of a resize too big = %+v, %v", out, err)
	}
	if got.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 100 {
		t.Errorf("a pending resize changed the allocated pod")
	}
	var st v1.PodStatus
	m.Decorate(big, &st)
	if len(st.Conditions) != 1 || st.Conditions[0].Type != v1.PodResizePending || st.Conditions[0].ObservedGeneration != 2 {
		t.Errorf("conditions = %+v", st.Conditions)
	}

	ok := withCPU(pod, "500m")
	ok.Generation = 3
	if _, out, err := m.Sync(ok, node); err != nil || !out.Started {
		t.Fatalf("Sync of a resize that fits = %+v, %v", out, err)
	}

	// berth restarts.
	m2, err := Open(dir, clk)
	if err != nil {
		t.Fatal(err)
	}
	got, out, err = m2.Sync(ok, node)
	if err != nil || out.Started || got != ok {
		t.Errorf("after a restart the admitted resize is admitted again: %+v %v", out, err)
	}
	if a := m2.Actuated(pod.UID)["c0"]; a.ID != "id0" || a.Resources.Requests.Cpu().MilliValue() != 100 {
		t.Errorf("actuated after a restart = %+v", a)
	}
	st = v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c0", ContainerID: "containerd://id0", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	m2.Decorate(ok, &st)
	cs := st.ContainerStatuses[0]
	if cs.AllocatedResources.Cpu().MilliValue() != 500 || cs.Resources.Limits.Cpu().MilliValue() != 100 {
		t.Errorf("container status = %+v", cs)
	}
	if len(st.Conditions) != 1 || st.Conditions[0].Type != v1.PodResizeInProgress || st.Conditions[0].ObservedGeneration != 3 {
		t.Errorf("conditions = %+v", st.Conditions)
	}
	if err := m2.Settle(ok, true, nil); err != nil {
		t.Fatal(err)
	}
	st = v1.PodStatus{}
	m2.Decorate(ok, &st)
	if len(st.Conditions) != 0 {
		t.Errorf("conditions after Settle = %+v", st.Conditions)
	}
	if err := m2.RemovePod(pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestManagerCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CheckpointName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Open(dir, clocktesting.NewFakePassiveClock(time.Unix(0, 0)))
	if err == nil {
		t.Fatal("a corrupt checkpoint is not an error")
	}
	if m == nil || len(m.Actuated("x")) != 0 {
		t.Fatal("no empty manager with the error")
	}
}

// A container that runs before the worker recorded what it runs with (its
// first status after its start) shows its allocation: the conformance
// specs read .resources of every running container as soon as the pod
// runs. One not running shows none.
func TestDecorateRunningWithoutRecord(t *testing.T) {
	m, err := Open(t.TempDir(), clocktesting.NewFakePassiveClock(time.Unix(1000, 0)))
	if err != nil {
		t.Fatal(err)
	}
	pod := podWith("p", res("100m", "200m", "", ""))
	if _, _, err := m.Sync(pod, Node{}); err != nil {
		t.Fatal(err)
	}
	st := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
		{Name: "c0", ContainerID: "containerd://new", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
	}}
	m.Decorate(pod, &st)
	if r := st.ContainerStatuses[0].Resources; r == nil || r.Requests.Cpu().MilliValue() != 100 || r.Limits.Cpu().MilliValue() != 200 {
		t.Errorf("resources of a running container without a record = %+v, want its allocation", r)
	}
	st.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}
	st.ContainerStatuses[0].Resources = nil
	m.Decorate(pod, &st)
	if r := st.ContainerStatuses[0].Resources; r != nil {
		t.Errorf("resources of a waiting container = %+v, want none", r)
	}
}
