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
	"k8s.io/apimachinery/pkg/types"
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
	// MaxEvents bounds them all: past it, the event seen least recently on
	// the node goes, whichever pod it is about.
	MaxEvents = 1000
)

// Recorder keeps the events of every pod. It is safe for concurrent use.
type Recorder struct {
	clk    clock.Clock
	source v1.EventSource

	mu sync.Mutex
	// objects holds each object's events (a pod's by name), least recently
	// seen first.
	objects map[object][]v1.Event
	// total is the number of events in objects.
	total int
	// serial makes event names unique; it starts at the creation time in
	// nanoseconds, as the API client's names do, so names read alike.
	serial uint64
	// sink, when set, receives a copy of every event recorded or repeated
	// (the API server's, in cluster mode).
	sink func(v1.Event)
}

// SetSink hands a copy of every event recorded from now on to sink, which
// must not block (it queues). Set it before the recorder is shared.
func (r *Recorder) SetSink(sink func(v1.Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sink = sink
}

// object is what events are kept by: a pod name, or the node.
type object struct{ kind, namespace, name string }

func podKey(namespace, name string) object { return object{"Pod", namespace, name} }

// NewRecorder returns a recorder whose events come from component on host
// (for berth: "berth" and the node name).
func NewRecorder(clk clock.Clock, component, host string) *Recorder {
	return &Recorder{
		clk:     clk,
		source:  v1.EventSource{Component: component, Host: host},
		objects: make(map[object][]v1.Event),
		serial:  uint64(clk.Now().UnixNano()),
	}
}

// Event records an event about pod. A repeat of an event of the same pod
// instance (UID), type, reason and message within AggregationWindow of its
// last occurrence increments its Count and moves its LastTimestamp instead
// of adding an entry. Types other than Normal and Warning are dropped, as
// the API server refuses them.
func (r *Recorder) Event(pod *v1.Pod, eventType, reason, message string) {
	if pod == nil {
		return
	}
	r.record(podKey(pod.Namespace, pod.Name), v1.ObjectReference{
		Kind:       "Pod",
		Namespace:  pod.Namespace,
		Name:       pod.Name,
		UID:        pod.UID,
		APIVersion: "v1",
	}, eventType, reason, message)
}

// NodeEvent records an event about the node itself (a device plugin that
// went away, a corrupt checkpoint), as the kubelet does with its node
// reference: Kind Node, and the node name as its UID.
func (r *Recorder) NodeEvent(eventType, reason, message string) {
	host := r.source.Host
	r.record(object{kind: "Node", name: host}, v1.ObjectReference{
		Kind: "Node", Name: host, UID: types.UID(host), APIVersion: "v1",
	}, eventType, reason, message)
}

// NodeEvents returns copies of the node's events, least recently seen first.
func (r *Recorder) NodeEvents() []v1.Event {
	return r.copies(object{kind: "Node", name: r.source.Host})
}

func (r *Recorder) record(key object, ref v1.ObjectReference, eventType, reason, message string) {
	if eventType != v1.EventTypeNormal && eventType != v1.EventTypeWarning {
		return
	}
	now := metav1.NewTime(r.clk.Now())

	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.objects[key]
	for i := range list {
		if !repeats(&list[i], ref.UID, eventType, reason, message, now.Time) {
			continue
		}
		e := list[i]
		e.Count++
		e.LastTimestamp = now
		// The repeat makes it the most recently seen.
		r.objects[key] = append(slices.Delete(list, i, i+1), e)
		if r.sink != nil {
			r.sink(*e.DeepCopy())
		}
		return
	}

	r.serial++
	e := v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("%s.%x", ref.Name, r.serial),
			Namespace:         ref.Namespace,
			CreationTimestamp: now,
		},
		InvolvedObject:      ref,
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
		drop := len(list) - MaxEventsPerPod + 1
		list = slices.Delete(list, 0, drop)
		r.total -= drop
	}
	r.objects[key] = append(list, e)
	r.total++
	if r.sink != nil {
		r.sink(*e.DeepCopy())
	}
	for r.total > MaxEvents {
		r.dropLeastRecent()
	}
}

// dropLeastRecent removes the event seen least recently on the node: the
// oldest of the objects' first (least recent) events.
func (r *Recorder) dropLeastRecent() {
	var oldest object
	found := false
	for key, list := range r.objects {
		if !found || seenBefore(&list[0], &r.objects[oldest][0]) {
			oldest, found = key, true
		}
	}
	if !found {
		return
	}
	if list := r.objects[oldest]; len(list) > 1 {
		r.objects[oldest] = slices.Delete(list, 0, 1)
	} else {
		delete(r.objects, oldest)
	}
	r.total--
}

// seenBefore orders events by when they were last seen, then by when they
// were first recorded, then by name, so that the order is total.
func seenBefore(a, b *v1.Event) bool {
	if !a.LastTimestamp.Equal(&b.LastTimestamp) {
		return a.LastTimestamp.Before(&b.LastTimestamp)
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp) ||
		(a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.Name < b.Name)
}

// repeats reports whether e is an earlier occurrence of the event being
// recorded, recent enough to absorb it.
func repeats(e *v1.Event, uid types.UID, eventType, reason, message string, now time.Time) bool {
	return e.InvolvedObject.UID == uid &&
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
	return r.copies(podKey(namespace, name))
}

func (r *Recorder) copies(key object) []v1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.objects[key]
	if len(list) == 0 {
		return nil
	}
	out := make([]v1.Event, len(list))
	for i := range list {
		list[i].DeepCopyInto(&out[i])
	}
	return out
}

// All returns copies of every event kept, about pods and the node, least
// recently seen first.
func (r *Recorder) All() []v1.Event {
	r.mu.Lock()
	out := make([]v1.Event, 0, r.total)
	for _, list := range r.objects {
		for i := range list {
			out = append(out, *list[i].DeepCopy())
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b v1.Event) int {
		switch {
		case seenBefore(&a, &b):
			return -1
		case seenBefore(&b, &a):
			return 1
		}
		return 0
	})
	return out
}

// Forget drops the events of a pod name that is gone for good.
func (r *Recorder) Forget(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := podKey(namespace, name)
	r.total -= len(r.objects[key])
	delete(r.objects, key)
}
