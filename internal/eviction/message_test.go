package eviction

import (
	"maps"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestEvictionMessage(t *testing.T) {
	p := newPod("web",
		container("app", "memory=100Mi", "ephemeral-storage=1Gi"),
		container("sidecar", "memory=1Gi"),
		container("idle"))
	stats := statsFor(statsOf(p).
		container("app", "300Mi", "50Mi", "10Mi", 1).
		container("sidecar", "10Mi", "100Mi", "20Mi", 1).
		container("idle", "1Mi", "", "", 0).
		build())
	memHard := threshold(t, SignalMemoryAvailable, "100Mi", 0)
	diskPct := threshold(t, SignalNodeFsAvailable, "10%", 0)
	obs := observations{
		SignalMemoryAvailable: {available: quantity("90Mi"), capacity: quantity("8Gi"), time: t0},
		SignalNodeFsAvailable: {available: quantity("5Gi"), capacity: quantity("100Gi"), time: t0},
	}
	for _, tc := range []struct {
		name        string
		r           v1.ResourceName
		thresholds  []Threshold
		stats       statsFunc
		want        string
		annotations map[string]string
	}{
		{
			name:       "memory: the containers above their request",
			r:          v1.ResourceMemory,
			thresholds: []Threshold{memHard, diskPct},
			stats:      stats,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. " +
				"Container app was using 300Mi, request is 100Mi, has larger consumption of memory. " +
				"Container idle was using 1Mi, request is 0, has larger consumption of memory. ",
			annotations: map[string]string{
				OffendingContainersKey:      "app,idle",
				OffendingContainersUsageKey: "300Mi,1Mi",
				StarvedResourceKey:          "memory",
			},
		},
		{
			// The float32 fraction resolves 10% of 100Gi to 10737418400
			// bytes, as the kubelet prints it.
			name:       "disk: a percentage threshold; usage is the writable layer plus the logs",
			r:          v1.ResourceEphemeralStorage,
			thresholds: []Threshold{memHard, diskPct},
			stats:      stats,
			want: "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. " +
				"Container sidecar was using 120Mi, request is 0, has larger consumption of ephemeral-storage. ",
			annotations: map[string]string{
				OffendingContainersKey:      "sidecar",
				OffendingContainersUsageKey: "120Mi",
				StarvedResourceKey:          "ephemeral-storage",
			},
		},
		{
			name:       "no threshold on the resource observed",
			r:          v1.ResourceMemory,
			thresholds: []Threshold{diskPct},
			stats:      statsFor(),
			want:       "The node was low on resource: memory. ",
		},
		{
			name:        "no stats for the pod: no container sentence, no annotations",
			r:           v1.ResourceMemory,
			thresholds:  []Threshold{memHard},
			stats:       statsFor(),
			want:        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. ",
			annotations: map[string]string{},
		},
		{
			name:       "inodes: nothing per container",
			r:          resourceInodes,
			thresholds: []Threshold{threshold(t, SignalNodeFsInodesFree, "1000", 0)},
			stats:      stats,
			want:       "The node was low on resource: inodes. ",
			annotations: map[string]string{
				OffendingContainersKey: "", OffendingContainersUsageKey: "", StarvedResourceKey: "inodes",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, annotations := evictionMessage(tc.r, p, tc.stats, tc.thresholds, obs)
			if got != tc.want {
				t.Errorf("message:\n got %q\nwant %q", got, tc.want)
			}
			if tc.annotations != nil && !maps.Equal(annotations, tc.annotations) {
				t.Errorf("annotations = %v, want %v", annotations, tc.annotations)
			}
		})
	}
}

func TestAdmissionMessage(t *testing.T) {
	if got, want := admissionMessage([]v1.NodeConditionType{v1.NodeDiskPressure}), "The node had condition: [DiskPressure]. "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := admissionMessage([]v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodePIDPressure}), "The node had condition: [MemoryPressure PIDPressure]. "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestEvictedStatus(t *testing.T) {
	p := newPod("a")
	p.Generation = 3
	s := evictedStatus(p, "The node was low on resource: memory. ", t0)
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" || s.Message != "The node was low on resource: memory. " {
		t.Errorf("status = %s/%s/%q", s.Phase, s.Reason, s.Message)
	}
	if len(s.Conditions) != 1 {
		t.Fatalf("conditions = %+v", s.Conditions)
	}
	c := s.Conditions[0]
	if c.Type != v1.DisruptionTarget || c.Status != v1.ConditionTrue || c.Reason != "TerminationByKubelet" ||
		c.Message != s.Message || c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("condition = %+v", c)
	}
}

func TestEvictionGracePeriod(t *testing.T) {
	hard := threshold(t, SignalMemoryAvailable, "100Mi", 0)
	soft := threshold(t, SignalMemoryAvailable, "1Gi", time.Minute)
	withGrace := func(s int64) *v1.Pod {
		return newPod("p", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s })
	}
	for _, tc := range []struct {
		name string
		t    Threshold
		pod  *v1.Pod
		max  int64
		want int64
	}{
		{"hard: one second whatever the pod asks", hard, withGrace(300), 600, 1},
		{"soft: the pod's when below the maximum", soft, withGrace(30), 60, 30},
		{"soft: capped at the maximum", soft, withGrace(300), 60, 60},
		{"soft: the maximum when the pod says nothing", soft, newPod("p"), 60, 60},
		{"soft: the kubelet's default maximum of 0", soft, withGrace(30), 0, 0},
		{"soft: a negative maximum defers to the pod", soft, withGrace(45), -1, 45},
		{"soft: a negative maximum and nothing from the pod", soft, newPod("p"), -1, 30},
	} {
		if got := evictionGracePeriod(tc.t, tc.pod, tc.max); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
