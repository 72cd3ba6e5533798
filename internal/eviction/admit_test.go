package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/v1helper"
)

func TestAdmit(t *testing.T) {
	bestEffort := newPod("best-effort", container("c"))
	burstable := newPod("burstable", container("c", "memory=100Mi"))
	tolerant := newPod("tolerates-memory-pressure", container("c"), func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	})
	tolerantOther := newPod("tolerates-disk-pressure", container("c"), func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists}}
	})
	static := newPod("static", container("c"), staticPod)
	critical := newPod("critical", container("c"), priorityOf(v1helper.SystemCriticalPriority))
	mirror := newPod("mirror", container("c"), func(p *v1.Pod) { p.Annotations[v1.MirrorPodAnnotationKey] = "x" })

	memory := []v1.NodeConditionType{v1.NodeMemoryPressure}
	disk := []v1.NodeConditionType{v1.NodeDiskPressure}
	both := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure}
	pid := []v1.NodeConditionType{v1.NodePIDPressure}
	for _, tc := range []struct {
		name       string
		conditions []v1.NodeConditionType
		pod        *v1.Pod
		want       bool
		message    string
	}{
		{"no pressure: best effort", nil, bestEffort, true, ""},
		{"memory pressure: burstable", memory, burstable, true, ""},
		{"memory pressure: best effort", memory, bestEffort, false, "The node had condition: [MemoryPressure]. "},
		{"memory pressure: best effort tolerating it", memory, tolerant, true, ""},
		{"memory pressure: best effort tolerating another taint", memory, tolerantOther, false, "The node had condition: [MemoryPressure]. "},
		{"memory pressure: static pod", memory, static, true, ""},
		{"disk pressure: burstable", disk, burstable, false, "The node had condition: [DiskPressure]. "},
		{"disk pressure: best effort tolerating memory pressure", disk, tolerant, false, "The node had condition: [DiskPressure]. "},
		{"disk pressure: critical by priority", disk, critical, true, ""},
		{"disk pressure: mirror pod", disk, mirror, true, ""},
		{"memory and disk pressure: burstable", both, burstable, false, "The node had condition: [MemoryPressure DiskPressure]. "},
		{"pid pressure: burstable", pid, burstable, false, "The node had condition: [PIDPressure]. "},
		{"pid pressure: static", pid, static, true, ""},
	} {
		ok, reason, message := admit(tc.conditions, tc.pod)
		if ok != tc.want || message != tc.message {
			t.Errorf("%s: admit = %v %q %q, want %v %q", tc.name, ok, reason, message, tc.want, tc.message)
		}
		if wantReason := map[bool]string{true: "", false: "Evicted"}[tc.want]; reason != wantReason {
			t.Errorf("%s: reason %q, want %q", tc.name, reason, wantReason)
		}
	}
}
