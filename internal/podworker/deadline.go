package podworker

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// The kubelet's words for a pod stopped by its activeDeadlineSeconds
// (pkg/kubelet/active_deadline.go).
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline says how long pod may still run before its
// activeDeadlineSeconds, counted from its status's startTime as the
// kubelet's activeDeadlineHandler counts it, and whether that time has come.
// A pod without a deadline, not started yet or finished has none (0, false).
func activeDeadline(pod *v1.Pod, st *v1.PodStatus, now time.Time) (left time.Duration, exceeded bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || st == nil || st.StartTime == nil || st.StartTime.IsZero() {
		return 0, false
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return 0, false // a finished pod is not active: the kubelet no longer syncs it
	}
	allowed := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	left = allowed - now.Sub(st.StartTime.Time)
	return left, left <= 0
}

// deadlineStatus is the terminal status of a pod past its deadline.
func deadlineStatus() v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodFailed, Reason: reasonDeadlineExceeded, Message: messageDeadlineExceeded}
}

// checkDeadline stops pod for good, as an eviction with the pod's own grace
// period, once its active deadline has passed; otherwise it returns how
// soon to look again (0: no deadline). The deadline may be set or shortened
// while the pod runs (it is one of the few fields an update may change).
func (w *worker) checkDeadline(pod *v1.Pod) (next time.Duration, stopped bool) {
	left, exceeded := activeDeadline(pod, w.published, w.ws.deps.Clock.Now())
	if !exceeded {
		return left, false
	}
	w.event(pod, v1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
	w.mu.Lock()
	if w.evicting == nil {
		w.evicting = &eviction{grace: gracePeriod(pod), status: deadlineStatus(), done: make(chan struct{})}
	}
	w.mu.Unlock()
	w.wake()
	return 0, true
}
