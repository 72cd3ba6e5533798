package events

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

func pod(ns, name, uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

// step records one event after advancing the clock by after.
type step struct {
	after   time.Duration
	pod     *v1.Pod
	typ     string
	reason  string
	message string
}

// seen is the part of a recorded event a case checks.
type seen struct {
	uid         string
	reason      string
	message     string
	count       int32
	first, last time.Duration // since t0
	typ         string
}

func summarize(events []v1.Event) []seen {
	var out []seen
	for _, e := range events {
		out = append(out, seen{
			uid: string(e.InvolvedObject.UID), reason: e.Reason, message: e.Message, count: e.Count,
			first: e.FirstTimestamp.Sub(t0), last: e.LastTimestamp.Sub(t0), typ: e.Type,
		})
	}
	return out
}

func TestRecorder(t *testing.T) {
	web := pod("default", "web", "u1")
	webEdited := pod("default", "web", "u2")
	other := pod("default", "db", "u3")
	const N, W = v1.EventTypeNormal, v1.EventTypeWarning

	tests := []struct {
		name  string
		steps []step
		want  []seen
	}{{
		name: "distinct events in order",
		steps: []step{
			{0, web, N, PullingImage, `Pulling image "busybox"`},
			{time.Second, web, N, PulledImage, `Successfully pulled image "busybox"`},
			{time.Second, web, N, CreatedContainer, "Created container: app"},
		},
		want: []seen{
			{"u1", "Pulling", `Pulling image "busybox"`, 1, 0, 0, N},
			{"u1", "Pulled", `Successfully pulled image "busybox"`, 1, time.Second, time.Second, N},
			{"u1", "Created", "Created container: app", 1, 2 * time.Second, 2 * time.Second, N},
		},
	}, {
		name: "a repeat is counted and becomes the latest",
		steps: []step{
			{0, web, W, BackOffStartContainer, "Back-off restarting failed container app"},
			{time.Second, web, N, StartedContainer, "Started container app"},
			{time.Minute, web, W, BackOffStartContainer, "Back-off restarting failed container app"},
			{time.Minute, web, W, BackOffStartContainer, "Back-off restarting failed container app"},
		},
		want: []seen{
			{"u1", "Started", "Started container app", 1, time.Second, time.Second, N},
			{"u1", "BackOff", "Back-off restarting failed container app", 3, 0, 2*time.Minute + time.Second, W},
		},
	}, {
		name: "the window counts from the last occurrence",
		steps: []step{
			{0, web, W, ContainerUnhealthy, "Liveness probe failed"},
			{9 * time.Minute, web, W, ContainerUnhealthy, "Liveness probe failed"},
			{9 * time.Minute, web, W, ContainerUnhealthy, "Liveness probe failed"},
		},
		want: []seen{{"u1", "Unhealthy", "Liveness probe failed", 3, 0, 18 * time.Minute, W}},
	}, {
		name: "a repeat after the window is a new event",
		steps: []step{
			{0, web, W, ContainerUnhealthy, "Liveness probe failed"},
			{AggregationWindow, web, W, ContainerUnhealthy, "Liveness probe failed"},
		},
		want: []seen{
			{"u1", "Unhealthy", "Liveness probe failed", 1, 0, 0, W},
			{"u1", "Unhealthy", "Liveness probe failed", 1, AggregationWindow, AggregationWindow, W},
		},
	}, {
		name: "type, reason and message all tell events apart",
		steps: []step{
			{0, web, W, FailedToStartContainer, "Error: exec format error"},
			{0, web, W, FailedToStartContainer, "Error: permission denied"},
			{0, web, W, FailedToInspectImage, "Error: exec format error"},
			{0, web, W, FailedToCreatePodContainer, "Error: exec format error"},
			{0, web, N, FailedToStartContainer, "Error: exec format error"},
		},
		want: []seen{
			{"u1", "Failed", "Error: exec format error", 1, 0, 0, W},
			{"u1", "Failed", "Error: permission denied", 1, 0, 0, W},
			{"u1", "InspectFailed", "Error: exec format error", 1, 0, 0, W},
			{"u1", "FailedCreatePodContainer", "Error: exec format error", 1, 0, 0, W},
			{"u1", "Failed", "Error: exec format error", 1, 0, 0, N},
		},
	}, {
		name: "a replaced pod keeps the name's history but not its counts",
		steps: []step{
			{0, web, N, KillingContainer, "Stopping container app"},
			{time.Second, webEdited, N, KillingContainer, "Stopping container app"},
			{time.Second, web, N, KillingContainer, "Stopping container app"},
		},
		want: []seen{
			{"u2", "Killing", "Stopping container app", 1, time.Second, time.Second, N},
			{"u1", "Killing", "Stopping container app", 2, 0, 2 * time.Second, N},
		},
	}, {
		name: "other pods are kept apart",
		steps: []step{
			{0, other, N, StartedContainer, "Started container db"},
			{0, web, N, StartedContainer, "Started container app"},
		},
		want: []seen{{"u1", "Started", "Started container app", 1, 0, 0, N}},
	}, {
		name: "unknown types are dropped",
		steps: []step{
			{0, web, "Error", FailedSync, "nope"},
			{0, web, "", FailedSync, "nope"},
			{0, nil, N, FailedSync, "no pod"},
		},
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			r := NewRecorder(clk, "berth", "node1")
			for _, s := range tt.steps {
				clk.Step(s.after)
				r.Event(s.pod, s.typ, s.reason, s.message)
			}
			if got := summarize(r.Events("default", "web")); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCap(t *testing.T) {
	tests := []struct {
		name     string
		recorded int
		// repeat, when not negative, is an event recorded again once
		// MaxEventsPerPod events are kept.
		repeat int
		want   []string // first, last and any other messages expected
		gone   string   // a message expected dropped
	}{
		{name: "up to the cap", recorded: MaxEventsPerPod, repeat: -1,
			want: []string{"event 0", fmt.Sprintf("event %d", MaxEventsPerPod-1)}},
		{name: "oldest dropped", recorded: MaxEventsPerPod + 5, repeat: -1,
			want: []string{"event 5", fmt.Sprintf("event %d", MaxEventsPerPod+4)}, gone: "event 4"},
		// A repeat refreshes the oldest event: the next oldest goes instead.
		{name: "least recently seen dropped", recorded: MaxEventsPerPod + 1, repeat: 0,
			want: []string{"event 2", fmt.Sprintf("event %d", MaxEventsPerPod), "event 0"}, gone: "event 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			r := NewRecorder(clk, "berth", "node1")
			p := pod("default", "web", "u1")
			for i := range tt.recorded {
				if i == MaxEventsPerPod && tt.repeat >= 0 {
					r.Eventf(p, v1.EventTypeNormal, StartedContainer, "event %d", tt.repeat)
				}
				clk.Step(time.Second)
				r.Eventf(p, v1.EventTypeNormal, StartedContainer, "event %d", i)
			}
			got := r.Events("default", "web")
			if len(got) != min(tt.recorded, MaxEventsPerPod) {
				t.Fatalf("kept %d events, want %d", len(got), min(tt.recorded, MaxEventsPerPod))
			}
			kept := map[string]bool{}
			for _, e := range got {
				kept[e.Message] = true
			}
			if got[0].Message != tt.want[0] || got[len(got)-1].Message != tt.want[1] {
				t.Errorf("kept %q .. %q, want %q .. %q", got[0].Message, got[len(got)-1].Message, tt.want[0], tt.want[1])
			}
			for _, m := range tt.want[2:] {
				if !kept[m] {
					t.Errorf("%q was dropped", m)
				}
			}
			if tt.gone != "" && kept[tt.gone] {
				t.Errorf("%q was kept", tt.gone)
			}
		})
	}
}

func TestEventFields(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := NewRecorder(clk, "berth", "node1")
	p := pod("kube-system", "dns", "uid-dns")
	r.Eventf(p, v1.EventTypeWarning, ContainerUnhealthy, "Readiness probe failed: HTTP probe failed with statuscode: %d", 503)
	clk.Step(time.Minute)
	r.Eventf(p, v1.EventTypeWarning, ContainerUnhealthy, "Readiness probe failed: HTTP probe failed with statuscode: %d", 503)
	r.Event(p, v1.EventTypeNormal, KillingContainer, "Stopping container coredns")

	got := r.Events("kube-system", "dns")
	if len(got) != 2 {
		t.Fatalf("got %d events", len(got))
	}
	first := metav1.NewTime(t0)
	later := metav1.NewTime(t0.Add(time.Minute))
	want := v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: got[0].Name, Namespace: "kube-system", CreationTimestamp: first},
		InvolvedObject: v1.ObjectReference{
			Kind: "Pod", Namespace: "kube-system", Name: "dns", UID: "uid-dns", APIVersion: "v1",
		},
		Reason:              "Unhealthy",
		Message:             "Readiness probe failed: HTTP probe failed with statuscode: 503",
		Source:              v1.EventSource{Component: "berth", Host: "node1"},
		FirstTimestamp:      first,
		LastTimestamp:       later,
		Count:               2,
		Type:                v1.EventTypeWarning,
		ReportingController: "berth",
		ReportingInstance:   "node1",
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("event:\n got %+v\nwant %+v", got[0], want)
	}
	for _, e := range got {
		if !strings.HasPrefix(e.Name, "dns.") || len(e.Name) <= len("dns.") {
			t.Errorf("name %q, want dns.<hex>", e.Name)
		}
	}
	if got[0].Name == got[1].Name {
		t.Errorf("two events share the name %q", got[0].Name)
	}

	// The caller owns the copies.
	got[1].Message = "changed"
	if again := r.Events("kube-system", "dns"); again[1].Message != "Stopping container coredns" {
		t.Errorf("a returned event aliases the recorder's: %q", again[1].Message)
	}
}

func TestForget(t *testing.T) {
	r := NewRecorder(clocktesting.NewFakeClock(t0), "berth", "node1")
	r.Event(pod("default", "web", "u1"), v1.EventTypeNormal, StartedContainer, "Started container app")
	r.Event(pod("default", "db", "u2"), v1.EventTypeNormal, StartedContainer, "Started container db")
	r.Forget("default", "web")
	if got := r.Events("default", "web"); got != nil {
		t.Errorf("forgotten pod still has %d events", len(got))
	}
	if got := r.Events("default", "db"); len(got) != 1 {
		t.Errorf("another pod lost its events: %d", len(got))
	}
	r.Forget("default", "never-seen")
}

func TestConcurrentUse(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := NewRecorder(clk, "berth", "node1")
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			p := pod("default", fmt.Sprintf("pod-%d", w%2), "u")
			for i := range each {
				r.Eventf(p, v1.EventTypeNormal, StartedContainer, "event %d", i%10)
				r.Events(p.Namespace, p.Name)
			}
		})
	}
	wg.Wait()
	for _, name := range []string{"pod-0", "pod-1"} {
		var total int32
		for _, e := range r.Events("default", name) {
			total += e.Count
		}
		if total != workers/2*each {
			t.Errorf("%s: counted %d occurrences, want %d", name, total, workers/2*each)
		}
	}
}

func TestNodeEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := NewRecorder(clk, "berth", "node-a")
	r.NodeEvent(v1.EventTypeWarning, "DeviceCheckpointCorrupt", "moved aside")
	r.NodeEvent(v1.EventTypeWarning, "DeviceCheckpointCorrupt", "moved aside")
	r.NodeEvent("Bogus", "X", "dropped")
	// A pod named like the node keeps its own history.
	r.Event(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "u"}}, v1.EventTypeNormal, "Started", "pod")

	got := r.NodeEvents()
	if len(got) != 1 {
		t.Fatalf("node events = %d, want 1: %+v", len(got), got)
	}
	e := got[0]
	want := v1.ObjectReference{Kind: "Node", Name: "node-a", UID: "node-a", APIVersion: "v1"}
	if e.InvolvedObject != want || e.Count != 2 || e.Reason != "DeviceCheckpointCorrupt" || e.Namespace != "" {
		t.Errorf("node event = %+v", e)
	}
	if pods := r.Events("", "node-a"); len(pods) != 1 || pods[0].InvolvedObject.Kind != "Pod" {
		t.Errorf("pod events = %+v", pods)
	}
}

func TestNodeWideCap(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := NewRecorder(clk, "berth", "node1")
	// Pods take turns, so each keeps well under its own cap while the node
	// goes past MaxEvents.
	pods := 20
	for i := range MaxEvents + 50 {
		clk.Step(time.Second)
		p := pod("default", fmt.Sprintf("p%d", i%pods), fmt.Sprintf("u%d", i%pods))
		r.Eventf(p, v1.EventTypeNormal, StartedContainer, "event %d", i)
		if i == MaxEvents {
			r.Eventf(pod("default", "p0", "u0"), v1.EventTypeNormal, StartedContainer, "event 0")
		}
	}
	all := r.All()
	if len(all) != MaxEvents {
		t.Fatalf("kept %d events, want %d", len(all), MaxEvents)
	}
	for i := 1; i < len(all); i++ {
		if all[i].LastTimestamp.Before(&all[i-1].LastTimestamp) {
			t.Fatalf("All is not least recently seen first at %d: %s after %s", i, all[i].LastTimestamp, all[i-1].LastTimestamp)
		}
	}
	// 1,051 recorded (the repeat of event 0 is past the aggregation window,
	// so a new event), 1,000 kept: the first event 0 and events 1-50 went.
	messages := map[string]bool{}
	for _, e := range all {
		messages[e.Message] = true
	}
	for _, m := range []string{"event 0", "event 51", fmt.Sprintf("event %d", MaxEvents+49)} {
		if !messages[m] {
			t.Errorf("%q was dropped", m)
		}
	}
	for _, m := range []string{"event 1", "event 50"} {
		if messages[m] {
			t.Errorf("%q was kept", m)
		}
	}
	if all[len(all)-1].Message != fmt.Sprintf("event %d", MaxEvents+49) {
		t.Errorf("the last event is %q", all[len(all)-1].Message)
	}
	r.Forget("default", "p1")
	clk.Step(time.Second)
	r.Eventf(pod("default", "p2", "u2"), v1.EventTypeNormal, StartedContainer, "after forget")
	if got, want := len(r.All()), MaxEvents-len(filter(all, "p1"))+1; got != want {
		t.Errorf("after Forget and one more event: %d kept, want %d", got, want)
	}
}

func filter(events []v1.Event, name string) []v1.Event {
	var out []v1.Event
	for _, e := range events {
		if e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}
