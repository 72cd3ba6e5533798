package lifecycle

import (
	"log/slog"

	v1 "k8s.io/api/core/v1"
)

// StatusWriter is where a pod's status is kept: the status manager.
type StatusWriter interface {
	Set(pod *v1.Pod, st v1.PodStatus)
}

// EventRecorder records an event about a pod.
type EventRecorder interface {
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Rejecter is the one writer of a rejected pod's status, the kubelet's
// rejectPod: every rejection, of the pipeline or of the device allocation
// at the pod's first sync, is logged, recorded as an event and written to
// the status manager here, and nowhere else. Events may be nil.
type Rejecter struct {
	Status StatusWriter
	Events EventRecorder
	Log    *slog.Logger
}

// Reject ends pod's admission with the kubelet's reason and message: it
// never starts, and its status is Failed.
func (r Rejecter) Reject(pod *v1.Pod, reason, message string) {
	r.Log.Warn("pod rejected", "pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID, "reason", reason, "message", message)
	if r.Events != nil {
		r.Events.Event(pod, v1.EventTypeWarning, reason, message)
	}
	r.Status.Set(pod, RejectedStatus(reason, message))
}

// RejectedStatus is the status of a pod that was not admitted, as the
// kubelet's rejectPod writes it.
func RejectedStatus(reason, message string) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message}
}
