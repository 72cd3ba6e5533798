// Package events records what berth decided about each pod as Kubernetes
// core/v1 Events, the way the kubelet's event recorder and the API server
// would store them, so `berth describe pod` can explain a pod's history.
// Events are kept in memory, per pod name, and are lost when berth stops.
package events

import (
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

const (
	// AggregationWindow is how long after its last occurrence an event
	// still absorbs an identical repeat, as the kubelet's event correlator
	// does: a container in crash-loop back-off shows one BackOff event
	// "(x40 over 3h)" rather than forty lines.
	AggregationWindow = 10 * time.Minute
	// MaxEventsPerPod bounds the memory one pod's history takes; the
	// events seen least recently go first.
	MaxEventsPerPod = 100
)

// Recorder keeps the events of every pod. It is safe for concurrent use.
type Recorder struct {
	clk    clock.Clock
	source v1.EventSource

	mu sync.Mutex
	// pods holds each pod name's events, least recently seen first.
	pods map[podName][]v1.Event
	// serial makes event names unique; it starts at the creation time in
	// nanoseconds, as the API client's names do, so names read alike.
	serial uint64
}

type podName struct{ namespace, name string }

// NewRecorder returns a recorder whose events come from component on host
// (for berth: "berth" and the node name).
func NewRecorder(clk clock.Clock, component, host string) *Recorder {
	return &Recorder{
		clk:    clk,
		source: v1.EventSource{Component: component, Host: host},
		pods:   make(map[podName][]v1.Event),
		serial: uint64(clk.Now().UnixNano()),
	}
}

// Event records an event about pod. A repeat of an event of the same pod
// instance (UID), type, reason and message within AggregationWindow of its
// last occurrence increments its Count and moves its LastTimestamp instead
// of adding an entry. Types other than Normal and Warning are dropped, as
// the API server refuses them.
func (r *Recorder) Event(pod *v1.Pod, eventType, reason, message string) {
	if pod == nil || (eventType != v1.EventTypeNormal && eventType != v1.EventTypeWarning) {
		return
	}
	now := metav1.NewTime(r.clk.Now())

	r.mu.Lock()
	defer r.mu.Unlock()
	key := podName{pod.Namespace, pod.Name}
	list := r.pods[key]
	for i := range list {
		if !repeats(&list[i], pod, eventType, reason, message, now.Time) {
			continue
		}
		e := list[i]
		e.Count++
		e.LastTimestamp = now
		// The repeat makes it the most recently seen.
		r.pods[key] = append(slices.Delete(list, i, i+1), e)
		return
	}

	r.serial++
	e := v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("%s.%x", pod.Name, r.serial),
			Namespace:         pod.Namespace,
			CreationTimestamp: now,
		},
		InvolvedObject: v1.ObjectReference{
			Kind:       "Pod",
			Namespace:  pod.Namespace,
			Name:       pod.Name,
			UID:        pod.UID,
			APIVersion: "v1",
		},
		Reason:              reason,
		Message:             message,
		Source:              r.source,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventType,
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
	if len(list) >= MaxEventsPerPod {
		list = slices.Delete(list, 0, len(list)-MaxEventsPerPod+1)
	}
	r.pods[key] = append(list, e)
}

// repeats reports whether e is an earlier occurrence of the event being
// recorded, recent enough to absorb it.
func repeats(e *v1.Event, pod *v1.Pod, eventType, reason, message string, now time.Time) bool {
	return e.InvolvedObject.UID == pod.UID &&
		e.Type == eventType && e.Reason == reason && e.Message == message &&
		now.Sub(e.LastTimestamp.Time) < AggregationWindow
}

// Eventf is Event with a formatted message.
func (r *Recorder) Eventf(pod *v1.Pod, eventType, reason, format string, args ...any) {
	r.Event(pod, eventType, reason, fmt.Sprintf(format, args...))
}

// Events returns copies of the events recorded for the pod name, least
// recently seen first (the order kubectl shows them in). They are kept by
// name, so a pod replaced by an edited manifest shows its predecessor's
// history too; InvolvedObject.UID tells the instances apart.
func (r *Recorder) Events(namespace, name string) []v1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.pods[podName{namespace, name}]
	if len(list) == 0 {
		return nil
	}
	out := make([]v1.Event, len(list))
	for i := range list {
		list[i].DeepCopyInto(&out[i])
	}
	return out
}

// Forget drops the events of a pod name that is gone for good.
func (r *Recorder) Forget(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, podName{namespace, name})
}
