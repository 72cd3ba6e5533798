package podworker

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestActiveDeadline(t *testing.T) {
	started := &v1.PodStatus{StartTime: &metav1.Time{Time: t0}}
	withDeadline := func(s int64) *v1.Pod {
		p := testPod(v1.RestartPolicyAlways, nil, "a")
		p.Spec.ActiveDeadlineSeconds = &s
		return p
	}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		st       *v1.PodStatus
		now      time.Time
		left     time.Duration
		exceeded bool
	}{
		{"no deadline", testPod(v1.RestartPolicyAlways, nil, "a"), started, t0.Add(time.Hour), 0, false},
		{"not started", withDeadline(5), &v1.PodStatus{}, t0.Add(time.Hour), 0, false},
		{"no status", withDeadline(5), nil, t0, 0, false},
		{"before", withDeadline(5), started, t0.Add(2 * time.Second), 3 * time.Second, false},
		{"at the deadline", withDeadline(5), started, t0.Add(5 * time.Second), 0, true},
		{"after", withDeadline(5), started, t0.Add(time.Minute), -55 * time.Second, true},
		{"finished before it", withDeadline(5), &v1.PodStatus{StartTime: &metav1.Time{Time: t0}, Phase: v1.PodSucceeded}, t0.Add(time.Minute), 0, false},
	} {
		left, exceeded := activeDeadline(tc.pod, tc.st, tc.now)
		if left != tc.left || exceeded != tc.exceeded {
			t.Errorf("%s: activeDeadline = %v, %v; want %v, %v", tc.name, left, exceeded, tc.left, tc.exceeded)
		}
	}
}
