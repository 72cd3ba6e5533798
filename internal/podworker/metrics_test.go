package podworker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSyncOperation(t *testing.T) {
	first, edited := &v1.Pod{}, &v1.Pod{}
	for _, tc := range []struct {
		name                  string
		pod, lastSynced       *v1.Pod
		terminating, evicting bool
		want                  string
	}{
		{"a new pod", first, nil, false, false, syncCreate},
		{"the same spec again", first, first, false, false, syncSync},
		{"a new spec", edited, first, false, false, syncUpdate},
		{"deleted", first, first, true, false, syncKill},
		{"an orphan", nil, nil, true, false, syncKill},
		{"evicted", first, first, false, true, syncKill},
	} {
		if got := syncOperation(tc.pod, tc.lastSynced, tc.terminating, tc.evicting); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestStartOutcome(t *testing.T) {
	for _, tc := range []struct {
		reason        string
		wantAttempted bool
		wantCode      string
	}{
		{"", true, ""},
		{reasonCrashLoopBackOff, false, ""},
		{reasonErrImagePull, true, "ErrImagePull"},
		{reasonImagePullBackOff, true, "ImagePullBackOff"},
		{reasonErrImageNeverPull, true, "ErrImageNeverPull"},
		{reasonCreateConfigError, true, "CreateContainerConfigError"},
		{reasonCreateContainerError, true, "CreateContainerError"},
		{reasonRunContainerError, true, "RunContainerError"},
		{reasonPostStartHookError, true, "PostStartHookError"},
	} {
		attempted, code := startOutcome(tc.reason)
		if attempted != tc.wantAttempted || code != tc.wantCode {
			t.Errorf("startOutcome(%q) = %v, %q; want %v, %q", tc.reason, attempted, code, tc.wantAttempted, tc.wantCode)
		}
	}
}

func TestStartTracker(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	step := func(d time.Duration) time.Duration { clk.SetTime(clk.Now().Add(d)); return d }
	var tr startTracker

	tr.begin(clk.Now())
	tr.add(phaseImagePull, time.Hour) // before admission: not part of a start
	if _, ok := tr.running(clk.Now()); ok {
		t.Fatal("a pod not yet admitted reported its start")
	}
	step(2 * time.Second) // waiting for a device plugin
	tr.admit(clk.Now(), false)
	tr.admit(clk.Now().Add(time.Hour), false) // admitted once
	tr.add(phaseSandbox, step(300*time.Millisecond))
	for range 2 { // an init container and an app container
		tr.add(phaseImagePull, step(time.Second))
		tr.add(phaseContainerCreate, step(50*time.Millisecond))
		tr.add(phaseContainerStart, step(100*time.Millisecond))
	}
	step(5 * time.Second) // the init container runs

	got, ok := tr.running(clk.Now())
	want := podStart{total: 2*time.Second + 300*time.Millisecond + 2*1150*time.Millisecond + 5*time.Second}
	want.phases[phaseAdmission] = 2 * time.Second
	want.phases[phaseSandbox] = 300 * time.Millisecond
	want.phases[phaseImagePull] = 2 * time.Second
	want.phases[phaseContainerCreate] = 100 * time.Millisecond
	want.phases[phaseContainerStart] = 200 * time.Millisecond
	if !ok || got != want {
		t.Fatalf("start = %+v (%v), want %+v", got, ok, want)
	}
	if _, ok := tr.running(clk.Now()); ok {
		t.Error("a start was reported twice")
	}

	// Found running after a restart of berth: not a start berth saw.
	tr.begin(clk.Now())
	tr.admit(clk.Now(), true)
	tr.add(phaseSandbox, time.Second) // a sandbox recreated later
	if s, ok := tr.running(clk.Now()); ok {
		t.Errorf("an adopted pod reported a start: %+v", s)
	}

	// Begun afresh (deleted and wanted again): a new start.
	tr.begin(clk.Now())
	tr.admit(clk.Now(), false)
	step(time.Second)
	if s, ok := tr.running(clk.Now()); !ok || s.total != time.Second {
		t.Errorf("the start after begin = %+v (%v), want 1s", s, ok)
	}
}

func TestPhaseNames(t *testing.T) {
	want := []string{"admission", "sandbox", "image_pull", "container_create", "container_start"}
	if int(numStartPhases) != len(want) {
		t.Fatalf("%d phases, want %d", numStartPhases, len(want))
	}
	for p := range numStartPhases {
		if p.String() != want[p] {
			t.Errorf("phase %d is %q, want %q", p, p, want[p])
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.synced(syncCreate, 2*time.Second)
	m.containerStarted(true, "")
	m.containerStarted(false, "")
	m.containerStarted(false, reasonCrashLoopBackOff)
	m.containerStarted(false, reasonErrImagePull)
	var s podStart
	s.total = 3 * time.Second
	s.phases[phaseSandbox] = 200 * time.Millisecond
	m.podStarted(s)

	got := gather(t, reg)
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`kubelet_started_containers_total{container_type="init_container"}`, 1},
		{`kubelet_started_containers_total{container_type="container"}`, 2}, // the crash-looping one did not try
		{`kubelet_started_containers_errors_total{code="ErrImagePull",container_type="container"}`, 1},
		{`kubelet_pod_worker_duration_seconds{operation_type="create"}`, 2},
		{`kubelet_pod_start_duration_seconds`, 3},
		{`berth_pod_start_phase_duration_seconds{phase="sandbox"}`, 0.2},
		{`berth_pod_start_phase_duration_seconds{phase="admission"}`, 0},
	} {
		v, ok := got[c.series]
		if !ok || v != c.want {
			t.Errorf("%s = %v (present %v), want %v", c.series, v, ok, c.want)
		}
	}
	if n := len(bucketsOf(t, reg, "kubelet_pod_start_duration_seconds")); n != len(podStartBuckets()) || podStartBuckets()[n-1] != 3600 {
		t.Errorf("pod start histogram has %d buckets, want the kubelet's %d up to an hour", n, len(podStartBuckets()))
	}
	if n := len(bucketsOf(t, reg, "kubelet_pod_worker_duration_seconds")); n != len(prometheus.DefBuckets) {
		t.Errorf("pod worker histogram has %d buckets, want the kubelet's (the default) %d", n, len(prometheus.DefBuckets))
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering the metrics twice on one registry succeeded")
	}

	// Workers built without metrics record nothing, and do not panic.
	var none *Metrics
	none.synced(syncSync, time.Second)
	none.containerStarted(false, "")
	none.podStarted(s)
}

// gather returns every series of reg by name and labels: a counter's or
// gauge's value, a histogram's sum.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			key := f.GetName()
			if len(m.Label) > 0 {
				key += "{"
				for i, l := range m.Label {
					if i > 0 {
						key += ","
					}
					key += l.GetName() + `="` + l.GetValue() + `"`
				}
				key += "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.Counter.GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

func bucketsOf(t *testing.T, reg *prometheus.Registry, name string) []*dto.Bucket {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.Metric[0].Histogram.Bucket
		}
	}
	t.Fatalf("%s not registered", name)
	return nil
}
