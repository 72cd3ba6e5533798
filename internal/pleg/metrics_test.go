package pleg

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// slowLister is a fakeLister whose every list takes `took` on clk.
type slowLister struct {
	fakeLister
	clk  *clocktesting.FakeClock
	took time.Duration
}

func (s *slowLister) ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	s.clk.Step(s.took)
	return s.fakeLister.ListPodSandboxes(ctx, f)
}

func TestRelistMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	l := &slowLister{clk: clk, took: 300 * time.Millisecond, fakeLister: fakeLister{
		sbs: []*runtimeapi.PodSandbox{sandbox("s1", "a", true)},
		cs:  []*runtimeapi.Container{ctr("c1", "s1", runtimeapi.ContainerState_CONTAINER_RUNNING)},
	}}
	p := New(l, time.Second, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), WithMetrics(m))
	if got := p.LastRelist(); got.Sandboxes != nil || !got.At.IsZero() {
		t.Fatalf("before any relist: %+v", got)
	}

	began := clk.Now()
	if _, err := p.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The clock started at 1700000000 and the relist took 0.3 s.
	const seenAt = 1700000000.3
	last := p.LastRelist()
	if len(last.Sandboxes) != 1 || len(last.Containers) != 1 || !last.At.Equal(began) {
		t.Errorf("last relist = %+v, want one sandbox and one container listed at %v", last, began)
	}
	checkPLEGMetrics(t, reg, 1, 0.3, seenAt)

	// A failed relist is timed too, but is not "seen", and keeps what the
	// last good one listed.
	l.mu.Lock()
	l.err = errors.New("runtime down")
	l.mu.Unlock()
	if _, err := p.Seed(context.Background()); err == nil {
		t.Fatal("relist against a failing runtime succeeded")
	}
	if got := p.LastRelist(); !got.At.Equal(began) {
		t.Errorf("a failed relist replaced the last one: %+v", got)
	}
	checkPLEGMetrics(t, reg, 2, 0.6, seenAt)
}

func checkPLEGMetrics(t *testing.T, reg *prometheus.Registry, relists uint64, sum, seen float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.Metric{}
	for _, f := range families {
		got[f.GetName()] = f.Metric[0]
	}
	h := got["kubelet_pleg_relist_duration_seconds"].GetHistogram()
	if h.GetSampleCount() != relists || h.GetSampleSum() < sum-1e-9 || h.GetSampleSum() > sum+1e-9 {
		t.Errorf("relist durations: %d relists, %vs; want %d, %vs", h.GetSampleCount(), h.GetSampleSum(), relists, sum)
	}
	if len(h.Bucket) != len(prometheus.DefBuckets) {
		t.Errorf("%d buckets, want the kubelet's (the default) %d", len(h.Bucket), len(prometheus.DefBuckets))
	}
	if v := got["kubelet_pleg_last_seen_seconds"].GetGauge().GetValue(); v != seen {
		t.Errorf("last seen = %v, want %v", v, seen)
	}
}
