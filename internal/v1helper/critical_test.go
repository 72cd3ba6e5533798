package v1helper

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func podWith(annotations map[string]string, priority *int32) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations},
		Spec:       v1.PodSpec{Priority: priority},
	}
}

func TestCriticalPod(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		pod                        *v1.Pod
		static, mirror, isCritical bool
	}{
		{name: "no annotations, no priority", pod: podWith(nil, nil)},
		{name: "file source", pod: podWith(map[string]string{ConfigSourceAnnotationKey: FileSource}, nil), static: true, isCritical: true},
		{name: "http source", pod: podWith(map[string]string{ConfigSourceAnnotationKey: HTTPSource}, nil), static: true, isCritical: true},
		{name: "empty source is still not the API server", pod: podWith(map[string]string{ConfigSourceAnnotationKey: ""}, nil), static: true, isCritical: true},
		{name: "api source", pod: podWith(map[string]string{ConfigSourceAnnotationKey: ApiserverSource}, nil)},
		{name: "mirror", pod: podWith(map[string]string{ConfigSourceAnnotationKey: ApiserverSource, ConfigMirrorAnnotationKey: "h"}, nil), mirror: true, isCritical: true},
		{name: "priority just below", pod: podWith(nil, ptr.To(SystemCriticalPriority-1))},
		{name: "system-cluster-critical", pod: podWith(nil, ptr.To(SystemCriticalPriority)), isCritical: true},
		{name: "system-node-critical", pod: podWith(nil, ptr.To(SystemCriticalPriority+1000)), isCritical: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsStaticPod(tc.pod); got != tc.static {
				t.Errorf("IsStaticPod = %v, want %v", got, tc.static)
			}
			if got := IsMirrorPod(tc.pod); got != tc.mirror {
				t.Errorf("IsMirrorPod = %v, want %v", got, tc.mirror)
			}
			if got := IsCriticalPod(tc.pod); got != tc.isCritical {
				t.Errorf("IsCriticalPod = %v, want %v", got, tc.isCritical)
			}
		})
	}
}

func TestPreemptable(t *testing.T) {
	static := podWith(map[string]string{ConfigSourceAnnotationKey: FileSource}, nil)
	critical := podWith(nil, ptr.To(SystemCriticalPriority))
	low := podWith(nil, ptr.To(int32(10)))
	high := podWith(nil, ptr.To(int32(20)))
	none := podWith(nil, nil)
	for _, tc := range []struct {
		name                 string
		preemptor, preemptee *v1.Pod
		want                 bool
	}{
		{"critical preempts non-critical", critical, high, true},
		{"static preempts a pod without priority", static, none, true},
		{"critical does not preempt static by criticality", critical, static, false},
		{"higher priority preempts lower", high, low, true},
		{"lower does not preempt higher", low, high, false},
		{"equal priority does not preempt", low, low, false},
		{"no priority on the preemptee", high, none, false},
		{"no priority on the preemptor", none, low, false},
		{"critical with a higher priority preempts a critical one", podWith(nil, ptr.To(SystemCriticalPriority+1000)), critical, true},
		{"nil preemptee", critical, nil, false},
	} {
		if got := Preemptable(tc.preemptor, tc.preemptee); got != tc.want {
			t.Errorf("%s: Preemptable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
