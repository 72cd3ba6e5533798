package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// evictionGracePeriod is how long an evicted pod gets to stop: 1s for a
// hard threshold; for a soft one the pod's terminationGracePeriodSeconds
// capped at evictionMaxPodGracePeriod, or the pod's alone when that is
// negative (as the kubelet documents it; the kubelet itself passes the
// negative value on, which the runtime takes as "kill at once").
func evictionGracePeriod(t Threshold, pod *v1.Pod, maxPodGrace int64) int64 {
	if t.IsHard() {
		return immediateEvictionGracePeriodSeconds
	}
	podGrace := pod.Spec.TerminationGracePeriodSeconds
	switch {
	case maxPodGrace < 0 && podGrace != nil:
		return *podGrace
	case maxPodGrace < 0:
		return v1.DefaultTerminationGracePeriodSeconds
	case podGrace != nil:
		return min(maxPodGrace, *podGrace)
	}
	return maxPodGrace
}

// evictedStatus is the status an evicted pod ends with: Failed, Evicted,
// the message, and a DisruptionTarget condition saying the kubelet (berth)
// terminated it.
func evictedStatus(pod *v1.Pod, message string, now time.Time) v1.PodStatus {
	return v1.PodStatus{
		Phase:   v1.PodFailed,
		Reason:  Reason,
		Message: message,
		Conditions: []v1.PodCondition{{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: pod.Generation,
			Status:             v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            message,
		}},
	}
}
