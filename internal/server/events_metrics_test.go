package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testEvent(pod, reason string, count int32) v1.Event {
	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	return v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: pod + "." + strings.ToLower(reason)},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: pod, UID: types.UID("uid-" + pod)},
		Reason:         reason, Message: reason + " container app", Type: v1.EventTypeNormal, Count: count,
		Source:         v1.EventSource{Component: "berth", Host: "node1"},
		FirstTimestamp: at, LastTimestamp: at,
	}
}

func TestPodEvents(t *testing.T) {
	web := []v1.Event{testEvent("web", "Created", 1), testEvent("web", "Started", 2)}
	gone := []v1.Event{testEvent("gone", "Killing", 1)}
	src := &fakeSource{
		pods:   []v1.Pod{testPod("default", "web", "app"), testPod("default", "quiet", "app")},
		events: map[string][]v1.Event{"default/web": web, "default/gone": gone},
	}
	tests := []struct {
		name     string
		target   string
		wantCode int
		want     []v1.Event // for 200
		wantBody string     // substring, for errors
	}{
		{name: "pod with events", target: "/pods/default/web/events", wantCode: 200, want: web},
		{name: "pod without events", target: "/pods/default/quiet/events", wantCode: 200, want: []v1.Event{}},
		{name: "gone pod whose events are kept", target: "/pods/default/gone/events", wantCode: 200, want: gone},
		{name: "unknown pod", target: "/pods/default/nope/events", wantCode: 404, wantBody: "pod default/nope not found"},
		{name: "other namespace", target: "/pods/kube-system/web/events", wantCode: 404, wantBody: "pod kube-system/web not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(t, newTestServer(src).Handler(), tt.target)
			if rec.Code != tt.wantCode {
				t.Fatalf("code %d (%q), want %d", rec.Code, rec.Body.String(), tt.wantCode)
			}
			if tt.wantCode != 200 {
				if !strings.Contains(rec.Body.String(), tt.wantBody) {
					t.Errorf("body %q does not contain %q", rec.Body.String(), tt.wantBody)
				}
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var raw map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
				t.Fatal(err)
			}
			if raw["apiVersion"] != "v1" || raw["kind"] != "EventList" {
				t.Errorf("apiVersion %v kind %v", raw["apiVersion"], raw["kind"])
			}
			if _, ok := raw["items"].([]any); !ok {
				t.Errorf("items = %#v, want a list", raw["items"])
			}
			var list v1.EventList
			if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
				t.Fatal(err)
			}
			// Semantic: times come back in the local zone.
			if !equality.Semantic.DeepEqual(list.Items, tt.want) {
				t.Errorf("events do not round-trip:\n got %+v\nwant %+v", list.Items, tt.want)
			}
		})
	}
}

// failingCollector stands for a collector that cannot read its source.
type failingCollector struct{ desc *prometheus.Desc }

func (c failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(c.desc, errors.New("cgroup file vanished"))
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	starts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_test_container_starts_total", Help: "Containers started.",
	}, []string{"namespace"})
	reg.MustRegister(starts)
	starts.WithLabelValues("default").Add(3)

	broken := prometheus.NewRegistry()
	broken.MustRegister(starts, failingCollector{prometheus.NewDesc("berth_test_broken", "Broken.", nil, nil)})

	tests := []struct {
		name     string
		gatherer prometheus.Gatherer
		wantCode int
		want     string
	}{
		{name: "exposition", gatherer: reg, wantCode: 200, want: `berth_test_container_starts_total{namespace="default"} 3`},
		{name: "a failing collector hides nothing else", gatherer: broken, wantCode: 200, want: `berth_test_container_starts_total{namespace="default"} 3`},
		{name: "no gatherer", gatherer: nil, wantCode: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New("127.0.0.1:0", &fakeSource{}, tt.gatherer, slog.New(slog.DiscardHandler)).Handler()
			rec := get(t, h, "/metrics")
			if rec.Code != tt.wantCode {
				t.Fatalf("code %d (%q), want %d", rec.Code, rec.Body.String(), tt.wantCode)
			}
			if tt.wantCode != http.StatusOK {
				return
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type %q, want the text exposition format", ct)
			}
			if !strings.Contains(rec.Body.String(), tt.want+"\n") {
				t.Errorf("body does not contain %q:\n%s", tt.want, rec.Body.String())
			}
		})
	}
}
