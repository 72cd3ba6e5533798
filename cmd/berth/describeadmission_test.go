package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"time"

	v1 "k8s.io/api/core/v1"

	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/server"
)

const (
	mi = 1 << 20
	gi = 1 << 30
)

// cand is a candidate for preemption requesting cpu millicores and memory
// bytes; none of either for a BestEffort pod.
func cand(pod string, qos v1.PodQOSClass, cpu, memory int64) admission.Candidate {
	c := admission.Candidate{Pod: pod, QOS: qos}
	if cpu != 0 || memory != 0 {
		c.Requests = map[v1.ResourceName]int64{v1.ResourceCPU: cpu, v1.ResourceMemory: memory}
	}
	return c
}

func cpuLeft(m int64) admission.Requirements {
	return admission.Requirements{{Resource: v1.ResourceCPU, Quantity: m}}
}

// The node behind these: 4 cpus, 8Gi; web, batch and proxy Burstable, db
// and queue Guaranteed, cache BestEffort, and a static kube-apiserver.
var (
	web       = cand("default/web", v1.PodQOSBurstable, 200, 256*mi)
	batch     = cand("default/batch", v1.PodQOSBurstable, 300, 512*mi)
	proxy     = cand("default/proxy", v1.PodQOSBurstable, 100, 64*mi)
	db        = cand("default/db", v1.PodQOSGuaranteed, 1000, gi)
	queue     = cand("default/queue", v1.PodQOSGuaranteed, 1500, gi)
	cache     = cand("default/cache", v1.PodQOSBestEffort, 0, 0)
	apiserver = cand("kube-system/kube-apiserver", v1.PodQOSBurstable, 250, 512*mi)

	critical = "it is critical (a static pod) and its priority (2000001000) is not below the preempting pod's (2000001000)"
)

func TestWriteAdmission(t *testing.T) {
	tests := []struct {
		name string
		rec  admissionRecord
		want string
	}{
		{name: "no record", rec: admissionRecord{}, want: ""},
		{name: "not fetched", rec: admissionRecord{err: errors.New("cannot reach berth's local API")},
			want: "Admission:  <error: cannot reach berth's local API>\n"},
		{name: "admitted", rec: admissionRecord{result: &admission.Result{Admit: true}}, want: `Admission:
  Result:  Admitted
`},
		{name: "adopted", rec: admissionRecord{result: &admission.Result{Admit: true,
			Note: "admitted without checks: it was running (or stopped for good) when berth started, and a pod is admitted only once"}},
			want: `Admission:
  Result:  Admitted
  Note:    admitted without checks: it was running (or stopped for good) when berth started, and a pod is admitted only once
`},
		{name: "rejected for cpu", rec: admissionRecord{result: &admission.Result{
			Reason:       "OutOfcpu",
			Message:      "Node didn't have enough resource: cpu, requested: 1500, used: 3350, capacity: 4000",
			Insufficient: []admission.InsufficientResource{{Resource: v1.ResourceCPU, Requested: 1500, Used: 3350, Capacity: 4000}},
			NoPreemption: "only a critical pod (static, mirror, or priority ≥ 2000000000) may preempt others",
		}}, want: `Admission:
  Result:   Rejected (OutOfcpu)
  Message:  Node didn't have enough resource: cpu, requested: 1500, used: 3350, capacity: 4000
  Failed checks:
    Insufficient cpu:  requested 1500m, used 3350m, allocatable 4000m, short by 850m
  Preemption:  only a critical pod (static, mirror, or priority ≥ 2000000000) may preempt others
`},
		{name: "critical pod rejected for its ports", rec: admissionRecord{result: &admission.Result{
			Reason:  "NodePorts",
			Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
			Insufficient: []admission.InsufficientResource{
				{Resource: v1.ResourceMemory, Requested: 6 * gi, Used: 3328 * mi, Capacity: 8 * gi},
				{Resource: v1.ResourcePods, Requested: 1, Used: 7, Capacity: 7},
			},
			Failures:     []admission.PredicateFailure{{Name: "NodePorts", Description: "node(s) didn't have free ports for the requested pod ports"}},
			NoPreemption: "it also failed NodePorts, which preempting pods cannot cure",
		}}, want: `Admission:
  Result:   Rejected (NodePorts)
  Message:  Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports
  Failed checks:
    Insufficient memory:  requested 6Gi, used 3328Mi, allocatable 8Gi, short by 1280Mi
    Insufficient pods:    requested 1, used 7, allocatable 7, short by 1
    NodePorts:            node(s) didn't have free ports for the requested pod ports
  Preemption:  it also failed NodePorts, which preempting pods cannot cure
`},
		{name: "preemption", rec: admissionRecord{result: &admission.Result{
			Admit:        true,
			Insufficient: []admission.InsufficientResource{{Resource: v1.ResourceCPU, Requested: 2100, Used: 3350, Capacity: 4000}},
			Preemption: &admission.Preemption{
				Requirements: cpuLeft(1450),
				Candidates:   []admission.Candidate{cache, web, batch, proxy, db, queue},
				Victims: []admission.Victim{
					{Candidate: batch, Remaining: cpuLeft(450), Distance: 1.0 / 9},
					{Candidate: web, Remaining: cpuLeft(150)},
					{Candidate: db, Remaining: cpuLeft(850)},
				},
				PassedOver: []admission.PassedOver{
					{Candidate: apiserver, Why: critical},
					{Candidate: cache, Why: "evicting the Burstable and Guaranteed victims frees enough"},
					{Candidate: proxy, Why: "the pods chosen before it freed enough", Distance: ptr.To(0.6049)},
					{Candidate: queue, Why: "the pods chosen before it freed enough", Distance: ptr.To(0.0)},
				},
			},
		}}, want: `Admission:
  Result:  Admitted after preempting 3 pods
  Requirements:
    cpu:  1450m
  Candidates:
    POD            QOS         REQUESTS
    default/cache  BestEffort  <none>
    default/web    Burstable   cpu=200m, memory=256Mi
    default/batch  Burstable   cpu=300m, memory=512Mi
    default/proxy  Burstable   cpu=100m, memory=64Mi
    default/db     Guaranteed  cpu=1000m, memory=1Gi
    default/queue  Guaranteed  cpu=1500m, memory=1Gi
  Victims:
    ORDER  POD            QOS         DISTANCE  REMAINING BEFORE
    1      default/batch  Burstable   0.1111    cpu=450m
    2      default/web    Burstable   0         cpu=150m
    3      default/db     Guaranteed  0         cpu=850m
  Passed over:
    POD                         WHY
    kube-system/kube-apiserver  it is critical (a static pod) and its priority (2000001000) is not below the preempting pod's (2000001000)
    default/cache               evicting the Burstable and Guaranteed victims frees enough
    default/proxy               the pods chosen before it freed enough (its distance was 0.6049)
    default/queue               the pods chosen before it freed enough (its distance was 0)
`},
		{name: "preemption that frees too little", rec: admissionRecord{result: &admission.Result{
			Reason:       admission.ReasonUnexpectedAdmissionError,
			Message:      "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 4250), ]",
			Insufficient: []admission.InsufficientResource{{Resource: v1.ResourceCPU, Requested: 8000, Used: 3750, Capacity: 4000}},
			Preemption: &admission.Preemption{
				Requirements: cpuLeft(7750),
				Candidates:   []admission.Candidate{cache, web, batch, db, queue},
				PassedOver:   []admission.PassedOver{{Candidate: apiserver, Why: critical}},
			},
		}}, want: `Admission:
  Result:   Rejected (UnexpectedAdmissionError)
  Message:  Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 4250), ]
  Requirements:
    cpu:  7750m
  Candidates:
    POD            QOS         REQUESTS
    default/cache  BestEffort  <none>
    default/web    Burstable   cpu=200m, memory=256Mi
    default/batch  Burstable   cpu=300m, memory=512Mi
    default/db     Guaranteed  cpu=1000m, memory=1Gi
    default/queue  Guaranteed  cpu=1500m, memory=1Gi
  Victims:  <none>
  Passed over:
    POD                         WHY
    kube-system/kube-apiserver  it is critical (a static pod) and its priority (2000001000) is not below the preempting pod's (2000001000)
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			w := newDescribeWriter(&b)
			writeAdmission(w, tt.rec)
			w.flush()
			if got := b.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s\ndiff:\n%s", got, tt.want, lineDiff(got, tt.want))
			}
		})
	}
}

func TestFormatAmount(t *testing.T) {
	tests := []struct {
		name v1.ResourceName
		v    int64
		want string
	}{
		{v1.ResourceCPU, 1500, "1500m"},
		{v1.ResourceCPU, 0, "0m"},
		{v1.ResourceMemory, 256 * mi, "256Mi"},
		{v1.ResourceMemory, 1500, "1500"},
		{v1.ResourceEphemeralStorage, 10 * gi, "10Gi"},
		{"hugepages-2Mi", 4 * mi, "4Mi"},
		{v1.ResourcePods, 110, "110"},
		{"example.com/gpu", 2, "2"},
	}
	for _, tt := range tests {
		if got := formatAmount(tt.name, tt.v); got != tt.want {
			t.Errorf("formatAmount(%s, %d) = %q, want %q", tt.name, tt.v, got, tt.want)
		}
	}
}

// TestDescribeAdmission runs describe against a real local API: a pod with
// a record shows it before its events, a pod without one (404) shows none,
// and a failure to fetch it shows in its place, the rest still described.
func TestDescribeAdmission(t *testing.T) {
	web, api := fullPod(), invalidManifestPod()
	src := &apiSource{
		pods: []v1.Pod{*web, *api},
		events: map[string][]v1.Event{
			"default/web": {event(v1.EventTypeNormal, "Started", "Started container app", 1, time.Minute, time.Minute)},
			"default/api": {event(v1.EventTypeWarning, "Failed", "manifest rejected", 1, time.Minute, time.Minute)},
		},
		admissions: map[string]admission.Result{"default/web": {Admit: true}},
	}
	api500 := false
	h := server.New("", src, nil, slog.New(slog.DiscardHandler)).Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if api500 && strings.HasSuffix(r.URL.Path, "/admission") {
			http.Error(w, "admission records unavailable", http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	client := newAPIClient(hs.URL)

	tests := []struct {
		name   string
		pod    string
		broken bool
		want   []string // in order
		absent string
	}{
		{name: "record", pod: "web",
			want: []string{"Tolerations:", "Admission:\n  Result:  Admitted\n", "Events:\n", "Started container app"}},
		{name: "no record", pod: "api",
			want: []string{"Reason:       InvalidManifest\n", "Events:\n", "manifest rejected"}, absent: "Admission"},
		{name: "not fetched", pod: "web", broken: true,
			want: []string{"Tolerations:", "Admission:", "  <error: " + hs.URL + "/pods/default/web/admission: 500 Internal Server Error: admission records unavailable>\n",
				"Events:\n", "Started container app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api500 = tt.broken
			var out, errOut strings.Builder
			if err := describe(context.Background(), &out, &errOut, client, "default", tt.pod, now, palette{}); err != nil {
				t.Fatal(err)
			}
			rest := out.String()
			for _, want := range tt.want {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("%q missing (or out of order) in\n%s", want, out.String())
				}
				rest = rest[i+len(want):]
			}
			if tt.absent != "" && strings.Contains(out.String(), tt.absent) {
				t.Errorf("%q in\n%s", tt.absent, out.String())
			}
		})
	}
}

func TestClientAdmission(t *testing.T) {
	src := &apiSource{admissions: map[string]admission.Result{"default/web": {Reason: "OutOfcpu", NoPreemption: "not critical"}}}
	hs := httptest.NewServer(server.New("", src, nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)
	c := newAPIClient(hs.URL)
	r, err := c.admission(context.Background(), "default", "web")
	if err != nil || r.Reason != "OutOfcpu" || r.NoPreemption != "not critical" {
		t.Errorf("admission(web) = %+v, %v", r, err)
	}
	if r, err := c.admission(context.Background(), "default", "nope"); !errors.Is(err, errNoAdmission) || r != nil {
		t.Errorf("admission(nope) = %+v, %v; want errNoAdmission", r, err)
	}
}
