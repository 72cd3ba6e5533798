package nodestatus

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(10 * time.Second)
)

func testIdentity() Identity {
	return Identity{
		Name: "n1", Labels: map[string]string{"zone": "a"}, ProviderID: "berth://n1",
		Taints:    []v1.Taint{{Key: "dedicated", Value: "edge", Effect: v1.TaintEffectNoSchedule}},
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}}, Port: 10250,
	}
}

func testObserved(notReady string) Observed {
	return Observed{
		Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), "example.com/gpu": resource.MustParse("2")},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1900m"), "example.com/gpu": resource.MustParse("2")},
		Pressure: []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse,
			Reason: "KubeletHasSufficientMemory", LastTransitionTime: metav1.NewTime(t0)}},
		NotReady: notReady,
		Info:     v1.NodeSystemInfo{KubeletVersion: "v1.37.0-berth+x"},
	}
}

func TestInitial(t *testing.T) {
	n := Initial(testIdentity(), testObserved(""), t0)
	for k, want := range map[string]string{v1.LabelHostname: "n1", v1.LabelOSStable: "linux", "zone": "a"} {
		if n.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	if n.Spec.ProviderID != "berth://n1" || len(n.Spec.Taints) != 1 {
		t.Errorf("spec = %+v", n.Spec)
	}
	if got := n.Status.Allocatable["example.com/gpu"]; got.Value() != 2 {
		t.Errorf("device allocatable = %s", got.String())
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("kubelet endpoint = %+v", n.Status.DaemonEndpoints)
	}
	ready := findCondition(n.Status.Conditions, v1.NodeReady)
	if ready == nil || ready.Status != v1.ConditionTrue || ready.Reason != "KubeletReady" {
		t.Fatalf("Ready = %+v", ready)
	}
}

func TestStatusTransitions(t *testing.T) {
	id := testIdentity()
	first := Status(id, testObserved(""), v1.NodeStatus{}, t0)
	// Same status later: heartbeat moves, transition stays.
	same := Status(id, testObserved(""), first, t1)
	r := findCondition(same.Conditions, v1.NodeReady)
	if !r.LastTransitionTime.Time.Equal(t0) || !r.LastHeartbeatTime.Time.Equal(t1) {
		t.Errorf("unchanged Ready: transition %v heartbeat %v", r.LastTransitionTime, r.LastHeartbeatTime)
	}
	if Changed(first, same) {
		t.Error("a heartbeat alone counts as a change")
	}
	// The runtime goes down: Ready turns False with the reason, now.
	down := Status(id, testObserved("container runtime is down: x"), same, t1)
	r = findCondition(down.Conditions, v1.NodeReady)
	if r.Status != v1.ConditionFalse || r.Reason != "KubeletNotReady" || r.Message != "container runtime is down: x" ||
		!r.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("NotReady = %+v", r)
	}
	if !Changed(same, down) {
		t.Error("Ready turning False is no change")
	}
	// A condition berth does not own is kept.
	prev := *down.DeepCopy()
	prev.Conditions = append(prev.Conditions, v1.NodeCondition{Type: "NetworkUnavailable", Status: v1.ConditionFalse})
	kept := Status(id, testObserved(""), prev, t1)
	if findCondition(kept.Conditions, "NetworkUnavailable") == nil {
		t.Error("a controller's condition was dropped")
	}
}

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changed bool
		last    time.Time
		now     time.Time
		want    bool
	}{
		{"never posted", false, time.Time{}, t0, true},
		{"changed", true, t0, t0.Add(time.Second), true},
		{"unchanged, within the report period", false, t0, t0.Add(4 * time.Minute), false},
		{"unchanged, report period over", false, t0, t0.Add(5 * time.Minute), true},
	} {
		if got := Due(tc.changed, tc.last, tc.now, 5*time.Minute); got != tc.want {
			t.Errorf("%s: Due = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReconcile(t *testing.T) {
	existing := &v1.Node{}
	existing.Labels = map[string]string{v1.LabelHostname: "n1", "keep": "me"}
	labels, changed := Reconcile(existing, testIdentity())
	if !changed || labels["zone"] != "a" || labels["keep"] != "me" || labels[v1.LabelArchStable] == "" {
		t.Errorf("labels = %v, changed %v", labels, changed)
	}
	existing.Labels = labels
	if _, changed := Reconcile(existing, testIdentity()); changed {
		t.Error("reconciled labels still change")
	}
}

func TestStatusPatchCarriesUID(t *testing.T) {
	old := Status(testIdentity(), testObserved(""), v1.NodeStatus{}, t0)
	next := Status(testIdentity(), testObserved("down"), old, t1)
	patch, err := statusPatch("uid-1", old, next)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"uid":"uid-1"`, `"KubeletNotReady"`} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch %s lacks %s", patch, want)
		}
	}
}

// The volumes in use are berth's to report; the volumes attached are the
// attach-detach controller's, which a status post must not remove.
func TestStatusVolumes(t *testing.T) {
	attached := []v1.AttachedVolume{{Name: "kubernetes.io/csi/d^h1", DevicePath: "csi-123"}}
	prev := Status(testIdentity(), testObserved(""), v1.NodeStatus{}, t0)
	prev.VolumesAttached = attached
	obs := testObserved("")
	obs.VolumesInUse = []v1.UniqueVolumeName{"kubernetes.io/csi/d^h1"}
	next := Status(testIdentity(), obs, prev, t1)
	if len(next.VolumesAttached) != 1 || next.VolumesAttached[0] != attached[0] {
		t.Errorf("volumes attached %v, want the controller's %v", next.VolumesAttached, attached)
	}
	if len(next.VolumesInUse) != 1 || next.VolumesInUse[0] != obs.VolumesInUse[0] {
		t.Errorf("volumes in use %v", next.VolumesInUse)
	}
	if !Changed(prev, next) {
		t.Error("a volume in use is no change")
	}
	patch, err := statusPatch("uid-1", prev, next)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(patch), "volumesAttached") || !strings.Contains(string(patch), `"volumesInUse":["kubernetes.io/csi/d^h1"]`) {
		t.Errorf("patch %s", patch)
	}
}
