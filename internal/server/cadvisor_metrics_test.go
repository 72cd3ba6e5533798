package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/stats"
)

var (
	readAt  = time.Unix(1_800_000_000, 0)
	started = time.Unix(1_799_990_000, 500_000_000)
)

func u64p(v uint64) *uint64 { return &v }

// testSnapshot is a node with one pod: one container with a CPU limit,
// and its sandbox with eth0.
func testSnapshot() *stats.Snapshot {
	pod := statsapi.PodReference{Name: "web", Namespace: "default", UID: "u1"}
	at := metav1.NewTime(readAt)
	return &stats.Snapshot{
		Time: readAt,
		Containers: []stats.ContainerSample{{
			Pod: pod, ID: "c1", Cgroup: "/kubepods/podu1/c1", Image: "busybox:1",
			Stats: statsapi.ContainerStats{
				Name: "app", StartTime: metav1.NewTime(started),
				CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u64p(2_500_000_000)},
				Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64p(4096), UsageBytes: u64p(8192), RSSBytes: u64p(2048)},
			},
			MemoryCache: u64p(1024),
			CFS:         &stats.CFSStats{Periods: 10, ThrottledPeriods: 2, ThrottledNanos: 1_500_000_000},
			Filesystems: []stats.FsSample{{Device: "/dev/sda1", Usage: 300, Limit: u64p(1000)}},
		}},
		Sandboxes: []stats.SandboxSample{{
			Pod: pod, ID: "s1", Cgroup: "/kubepods/podu1/s1", StartTime: started,
			Network: []statsapi.InterfaceStats{{Name: "eth0", RxBytes: u64p(100), TxBytes: u64p(50), RxErrors: u64p(0), TxErrors: u64p(1)}},
		}},
		Machine: stats.MachineInfo{Cores: 2, MemoryBytes: 1 << 30, BootID: "b", MachineID: "m", SystemUUID: "s"},
	}
}

func renderSamples(ss []resourceSample) []string {
	var out []string
	for _, s := range ss {
		at := "-"
		if !s.at.IsZero() {
			at = fmt.Sprint(s.at.Unix())
		}
		out = append(out, fmt.Sprintf("%s{%s} %v @%s", s.name, strings.Join(s.labels, ","), s.value, at))
	}
	slices.Sort(out)
	return out
}

func TestCadvisorSamples(t *testing.T) {
	now := readAt.Add(5 * time.Second)
	app := "app,/kubepods/podu1/c1,busybox:1,c1,default,web"
	sb := ",/kubepods/podu1/s1,,s1,default,web"
	full := []string{
		"container_cpu_cfs_periods_total{" + app + "} 10 @1800000000",
		"container_cpu_cfs_throttled_periods_total{" + app + "} 2 @1800000000",
		"container_cpu_cfs_throttled_seconds_total{" + app + "} 1.5 @1800000000",
		"container_cpu_usage_seconds_total{" + app + ",total} 2.5 @1800000000",
		"container_fs_limit_bytes{" + app + ",/dev/sda1} 1000 @-",
		"container_fs_usage_bytes{" + app + ",/dev/sda1} 300 @-",
		"container_last_seen{" + app + "} 1.800000005e+09 @1800000005",
		"container_last_seen{" + sb + "} 1.800000005e+09 @1800000005",
		"container_memory_cache{" + app + "} 1024 @1800000000",
		"container_memory_rss{" + app + "} 2048 @1800000000",
		"container_memory_usage_bytes{" + app + "} 8192 @1800000000",
		"container_memory_working_set_bytes{" + app + "} 4096 @1800000000",
		"container_network_receive_bytes_total{" + sb + ",eth0} 100 @-",
		"container_network_receive_errors_total{" + sb + ",eth0} 0 @-",
		"container_network_transmit_bytes_total{" + sb + ",eth0} 50 @-",
		"container_network_transmit_errors_total{" + sb + ",eth0} 1 @-",
		"container_start_time_seconds{" + app + "} 1.7999900005e+09 @-",
		"container_start_time_seconds{" + sb + "} 1.7999900005e+09 @-",
		"machine_cpu_cores{b,m,s} 2 @1800000000",
		"machine_memory_bytes{b,m,s} 1.073741824e+09 @1800000000",
	}
	bare := testSnapshot()
	bare.Containers[0].CFS, bare.Containers[0].MemoryCache, bare.Containers[0].Stats.CPU = nil, nil, nil
	bare.Containers[0].Stats.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(readAt), WorkingSetBytes: u64p(4096)}
	bare.Containers[0].Filesystems[0].Limit = nil
	bare.Sandboxes[0].Network = nil
	bare.Machine = stats.MachineInfo{}
	for _, tc := range []struct {
		name string
		snap *stats.Snapshot
		want []string
	}{
		{"everything known", testSnapshot(), full},
		{"unknown values are left out, not 0", bare, []string{
			"container_fs_usage_bytes{" + app + ",/dev/sda1} 300 @-",
			"container_last_seen{" + app + "} 1.800000005e+09 @1800000005",
			"container_last_seen{" + sb + "} 1.800000005e+09 @1800000005",
			"container_memory_working_set_bytes{" + app + "} 4096 @1800000000",
			"container_start_time_seconds{" + app + "} 1.7999900005e+09 @-",
			"container_start_time_seconds{" + sb + "} 1.7999900005e+09 @-",
		}},
		{"no reading", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderSamples(cadvisorSamples(tc.snap, now))
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// metricsSource is a source that also serves /metrics/cadvisor,
// /metrics/probes and a CPU-and-memory /metrics/resource.
type metricsSource struct {
	*fakeSource
	snap      *stats.Snapshot
	resource  *statsapi.Summary
	probes    *prometheus.Registry
	snapshots int
}

func (m *metricsSource) ContainerMetrics() (*stats.Snapshot, error) {
	m.snapshots++
	return m.snap, nil
}
func (m *metricsSource) ResourceStats() (*statsapi.Summary, error) { return m.resource, nil }
func (m *metricsSource) ProbeMetrics() prometheus.Gatherer         { return m.probes }

func scrape(t testing.TB, h http.Handler, path string) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: code %d: %s", path, rec.Code, rec.Body.String())
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("%s: parse: %v\n%s", path, err, rec.Body.String())
	}
	return families
}

func TestMetricsEndpoints(t *testing.T) {
	probes := prometheus.NewRegistry()
	probeTotal := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "x"}, []string{"probe_type"})
	probeTotal.WithLabelValues("Readiness").Inc()
	probes.MustRegister(probeTotal)
	resourceOnly := &statsapi.Summary{Node: statsapi.NodeStats{Memory: memStats(100)}}
	src := &metricsSource{fakeSource: &fakeSource{summary: testSummary()}, snap: testSnapshot(), resource: resourceOnly, probes: probes}
	h := newTestServer(src).Handler()

	families := scrape(t, h, "/metrics/cadvisor")
	for _, m := range cadvisorMetrics() {
		f := families[m.name]
		if f == nil {
			t.Errorf("%s missing", m.name)
			continue
		}
		wantType := dto.MetricType_GAUGE
		if m.kind == prometheus.CounterValue {
			wantType = dto.MetricType_COUNTER
		}
		if f.GetType() != wantType || f.GetHelp() != m.help {
			t.Errorf("%s: %v %q, want %v %q", m.name, f.GetType(), f.GetHelp(), wantType, m.help)
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		want := slices.Sorted(slices.Values(m.labels))
		if !slices.Equal(labels, want) {
			t.Errorf("%s labels %v, want %v", m.name, labels, want)
		}
	}

	if f := scrape(t, h, "/metrics/probes")["prober_probe_total"]; len(f.GetMetric()) != 1 {
		t.Errorf("/metrics/probes: %v", f)
	}
	// /metrics/resource reads the CPU-and-memory path, not the summary.
	resource := scrape(t, h, "/metrics/resource")
	if resource[nodeMemoryWorkingSet] == nil || resource[containerCPUUsage] != nil {
		t.Errorf("/metrics/resource did not come from ResourceStats: %v", series(resource))
	}

	// A source that gives none of them serves neither endpoint.
	plain := newTestServer(&fakeSource{summary: testSummary()}).Handler()
	for _, path := range []string{"/metrics/cadvisor", "/metrics/probes"} {
		if rec := get(t, plain, path); rec.Code != http.StatusNotFound {
			t.Errorf("%s without a source: %d, want 404", path, rec.Code)
		}
	}
}

// benchSnapshot is a node of 50 pods of 2 containers each.
func benchSnapshot() *stats.Snapshot {
	s := testSnapshot()
	c, sb := s.Containers[0], s.Sandboxes[0]
	s.Containers, s.Sandboxes = nil, nil
	for i := range 50 {
		pod := statsapi.PodReference{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: fmt.Sprintf("u%d", i)}
		for j := range 2 {
			cc := c
			cc.Pod, cc.ID = pod, fmt.Sprintf("c-%d-%d", i, j)
			cc.Stats.Name, cc.Cgroup = fmt.Sprintf("app-%d", j), "/kubepods/pod"+pod.UID+"/"+cc.ID
			s.Containers = append(s.Containers, cc)
		}
		ss := sb
		ss.Pod, ss.ID, ss.Cgroup = pod, "s-"+pod.UID, "/kubepods/pod"+pod.UID+"/s-"+pod.UID
		s.Sandboxes = append(s.Sandboxes, ss)
	}
	return s
}

// BenchmarkCadvisorScrape is one scrape of /metrics/cadvisor for 100
// containers, from a reading already made: what a Prometheus scrape costs
// berth between two readings.
func BenchmarkCadvisorScrape(b *testing.B) {
	snap := benchSnapshot()
	h := cadvisorMetricsHandler(func() (*stats.Snapshot, error) { return snap, nil },
		clocktesting.NewFakePassiveClock(readAt), slog.New(slog.DiscardHandler))
	req := httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}
