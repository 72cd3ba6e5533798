package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/stats"
)

// ContainerMetricsSource is what a Source also gives when it serves
// /metrics/cadvisor: the node's latest reading, shared with
// /stats/summary and eviction rather than read per scrape.
type ContainerMetricsSource interface {
	ContainerMetrics() (*stats.Snapshot, error)
}

// ResourceMetricsSource is what a Source also gives when /metrics/resource
// has a path of its own: CPU and memory only (stats.Provider.CPUAndMemory).
// Without it, /metrics/resource reads StatsSummary.
type ResourceMetricsSource interface {
	ResourceStats() (*statsapi.Summary, error)
}

// ProbeMetricsSource is what a Source also gives when it serves
// /metrics/probes: the prober's own registry.
type ProbeMetricsSource interface {
	ProbeMetrics() prometheus.Gatherer
}

// The series of /metrics/cadvisor, with cAdvisor's (v0.56) names, help and
// labels, as the kubelet serves them from its embedded cAdvisor.
const (
	cadvisorCPUUsage          = "container_cpu_usage_seconds_total"
	cadvisorCFSPeriods        = "container_cpu_cfs_periods_total"
	cadvisorCFSThrottled      = "container_cpu_cfs_throttled_periods_total"
	cadvisorCFSThrottledTime  = "container_cpu_cfs_throttled_seconds_total"
	cadvisorMemoryWorkingSet  = "container_memory_working_set_bytes"
	cadvisorMemoryUsage       = "container_memory_usage_bytes"
	cadvisorMemoryRSS         = "container_memory_rss"
	cadvisorMemoryCache       = "container_memory_cache"
	cadvisorNetReceiveBytes   = "container_network_receive_bytes_total"
	cadvisorNetTransmitBytes  = "container_network_transmit_bytes_total"
	cadvisorNetReceiveErrors  = "container_network_receive_errors_total"
	cadvisorNetTransmitErrors = "container_network_transmit_errors_total"
	cadvisorFsUsage           = "container_fs_usage_bytes"
	cadvisorFsLimit           = "container_fs_limit_bytes"
	cadvisorStartTime         = "container_start_time_seconds"
	cadvisorLastSeen          = "container_last_seen"
	cadvisorMachineCores      = "machine_cpu_cores"
	cadvisorMachineMemory     = "machine_memory_bytes"
)

// containerLabels are the labels the kubelet gives every cAdvisor
// container series (its containerPrometheusLabelsFunc).
var containerLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

// cadvisorMetrics are the families of /metrics/cadvisor.
func cadvisorMetrics() []resourceMetric {
	with := func(extra ...string) []string { return append(append([]string{}, containerLabels...), extra...) }
	machine := []string{"boot_id", "machine_id", "system_uuid"}
	return []resourceMetric{
		{cadvisorCPUUsage, "Cumulative cpu time consumed in seconds.", prometheus.CounterValue, with("cpu")},
		{cadvisorCFSPeriods, "Number of elapsed enforcement period intervals.", prometheus.CounterValue, with()},
		{cadvisorCFSThrottled, "Number of throttled period intervals.", prometheus.CounterValue, with()},
		{cadvisorCFSThrottledTime, "Total time duration the container has been throttled.", prometheus.CounterValue, with()},
		{cadvisorMemoryWorkingSet, "Current working set in bytes.", prometheus.GaugeValue, with()},
		{cadvisorMemoryUsage, "Current memory usage in bytes, including all memory regardless of when it was accessed", prometheus.GaugeValue, with()},
		{cadvisorMemoryRSS, "Size of RSS in bytes.", prometheus.GaugeValue, with()},
		{cadvisorMemoryCache, "Number of bytes of page cache memory.", prometheus.GaugeValue, with()},
		{cadvisorNetReceiveBytes, "Cumulative count of bytes received", prometheus.CounterValue, with("interface")},
		{cadvisorNetTransmitBytes, "Cumulative count of bytes transmitted", prometheus.CounterValue, with("interface")},
		{cadvisorNetReceiveErrors, "Cumulative count of errors encountered while receiving", prometheus.CounterValue, with("interface")},
		{cadvisorNetTransmitErrors, "Cumulative count of errors encountered while transmitting", prometheus.CounterValue, with("interface")},
		{cadvisorFsUsage, "Number of bytes that are consumed by the container on this filesystem.", prometheus.GaugeValue, with("device")},
		{cadvisorFsLimit, "Number of bytes that can be consumed by the container on this filesystem.", prometheus.GaugeValue, with("device")},
		{cadvisorStartTime, "Start time of the container since unix epoch in seconds.", prometheus.GaugeValue, with()},
		{cadvisorLastSeen, "Last time a container was seen by the exporter", prometheus.GaugeValue, with()},
		{cadvisorMachineCores, "Number of logical CPU cores.", prometheus.GaugeValue, machine},
		{cadvisorMachineMemory, "Amount of memory installed on the machine.", prometheus.GaugeValue, machine},
	}
}

// cadvisorSamples turns a reading into the samples of /metrics/cadvisor:
// each running container's CPU, memory, throttling and filesystems, each
// pod's network on its sandbox (container "", as cAdvisor shows the
// sandbox), and the machine. A value the reading lacks is left out, not
// reported as 0. now is the scrape's time, container_last_seen's value.
func cadvisorSamples(s *stats.Snapshot, now time.Time) []resourceSample {
	if s == nil {
		return nil
	}
	var out []resourceSample
	for i := range s.Containers {
		out = append(out, containerSamples(&s.Containers[i], now)...)
	}
	for i := range s.Sandboxes {
		out = append(out, sandboxSamples(&s.Sandboxes[i], now)...)
	}
	m := s.Machine
	ids := []string{m.BootID, m.MachineID, m.SystemUUID}
	if m.Cores > 0 {
		out = append(out, resourceSample{name: cadvisorMachineCores, labels: ids, value: float64(m.Cores), at: s.Time})
	}
	if m.MemoryBytes > 0 {
		out = append(out, resourceSample{name: cadvisorMachineMemory, labels: ids, value: float64(m.MemoryBytes), at: s.Time})
	}
	return out
}

func containerSamples(c *stats.ContainerSample, now time.Time) []resourceSample {
	base := []string{c.Stats.Name, c.Cgroup, c.Image, c.ID, c.Pod.Namespace, c.Pod.Name}
	var out []resourceSample
	add := func(name string, at time.Time, value float64, extra ...string) {
		out = append(out, resourceSample{name: name, labels: append(append([]string{}, base...), extra...), value: value, at: at})
	}
	if cpu := c.Stats.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		add(cadvisorCPUUsage, cpu.Time.Time, coreSeconds(*cpu.UsageCoreNanoSeconds), "total")
	}
	if cfs := c.CFS; cfs != nil {
		at := readingTime(c.Stats.CPU)
		add(cadvisorCFSPeriods, at, float64(cfs.Periods))
		add(cadvisorCFSThrottled, at, float64(cfs.ThrottledPeriods))
		add(cadvisorCFSThrottledTime, at, coreSeconds(cfs.ThrottledNanos))
	}
	if mem := c.Stats.Memory; mem != nil {
		for _, v := range []struct {
			name  string
			value *uint64
		}{
			{cadvisorMemoryWorkingSet, mem.WorkingSetBytes},
			{cadvisorMemoryUsage, mem.UsageBytes},
			{cadvisorMemoryRSS, mem.RSSBytes},
			{cadvisorMemoryCache, c.MemoryCache},
		} {
			if v.value != nil {
				add(v.name, mem.Time.Time, float64(*v.value))
			}
		}
	}
	for _, fs := range c.Filesystems {
		add(cadvisorFsUsage, time.Time{}, float64(fs.Usage), fs.Device)
		if fs.Limit != nil {
			add(cadvisorFsLimit, time.Time{}, float64(*fs.Limit), fs.Device)
		}
	}
	if start := c.Stats.StartTime; start.Unix() > 0 {
		add(cadvisorStartTime, time.Time{}, float64(start.UnixNano())/float64(time.Second))
	}
	add(cadvisorLastSeen, now, float64(now.Unix()))
	return out
}

// sandboxSamples are the pod's network, on its sandbox: cAdvisor's
// pause-container series, with no container name and no image (berth does
// not track the sandbox image per pod).
func sandboxSamples(sb *stats.SandboxSample, now time.Time) []resourceSample {
	base := []string{"", sb.Cgroup, "", sb.ID, sb.Pod.Namespace, sb.Pod.Name}
	var out []resourceSample
	add := func(name string, value float64, extra ...string) {
		out = append(out, resourceSample{name: name, labels: append(append([]string{}, base...), extra...), value: value})
	}
	// The kernel's counters are read with the rest of the reading, whose
	// time the sandbox does not keep: no timestamp, as for the start time.
	for _, n := range sb.Network {
		for _, v := range []struct {
			name  string
			value *uint64
		}{
			{cadvisorNetReceiveBytes, n.RxBytes}, {cadvisorNetTransmitBytes, n.TxBytes},
			{cadvisorNetReceiveErrors, n.RxErrors}, {cadvisorNetTransmitErrors, n.TxErrors},
		} {
			if v.value != nil {
				add(v.name, float64(*v.value), n.Name)
			}
		}
	}
	if sb.StartTime.Unix() > 0 {
		add(cadvisorStartTime, float64(sb.StartTime.UnixNano())/float64(time.Second))
	}
	out = append(out, resourceSample{name: cadvisorLastSeen, labels: base, value: float64(now.Unix()), at: now})
	return out
}

func readingTime(cpu *statsapi.CPUStats) time.Time {
	if cpu == nil {
		return time.Time{}
	}
	return cpu.Time.Time
}

// cadvisorCollector serves the reading a ContainerMetricsSource gives.
type cadvisorCollector struct {
	snapshot func() (*stats.Snapshot, error)
	clk      clock.PassiveClock
	log      *slog.Logger
	descs    map[string]resourceDesc
}

func newCadvisorCollector(snapshot func() (*stats.Snapshot, error), clk clock.PassiveClock, log *slog.Logger) *cadvisorCollector {
	c := &cadvisorCollector{snapshot: snapshot, clk: clk, log: log, descs: map[string]resourceDesc{}}
	for _, m := range cadvisorMetrics() {
		c.descs[m.name] = resourceDesc{prometheus.NewDesc(m.name, m.help, m.labels, nil), m.kind}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
}

// Collect implements prometheus.Collector. A reading that cannot be had
// gives no series, as the kubelet's cAdvisor collector, and is logged.
func (c *cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	snap, err := c.snapshot()
	if err != nil {
		c.log.Warn("container metrics unavailable: measuring the node failed", "err", err)
		return
	}
	for _, s := range cadvisorSamples(snap, c.clk.Now()) {
		ch <- constMetric(c.descs[s.name], s)
	}
}

// cadvisorMetricsHandler serves /metrics/cadvisor from a registry of its
// own, as the kubelet does.
func cadvisorMetricsHandler(snapshot func() (*stats.Snapshot, error), clk clock.PassiveClock, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCadvisorCollector(snapshot, clk, log))
	return metricsHandler(reg, log)
}
