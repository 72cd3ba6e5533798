package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The series of /metrics/resource, named as the kubelet names them
// (pkg/kubelet/metrics/collectors/resource_metrics.go): metrics-server
// looks them up by these names.
const (
	nodeCPUUsage              = "node_cpu_usage_seconds_total"
	nodeMemoryWorkingSet      = "node_memory_working_set_bytes"
	nodeSwapUsage             = "node_swap_usage_bytes"
	containerStartTime        = "container_start_time_seconds"
	containerCPUUsage         = "container_cpu_usage_seconds_total"
	containerMemoryWorkingSet = "container_memory_working_set_bytes"
	containerSwapUsage        = "container_swap_usage_bytes"
	containerSwapLimit        = "container_swap_limit_bytes"
	podCPUUsage               = "pod_cpu_usage_seconds_total"
	podMemoryWorkingSet       = "pod_memory_working_set_bytes"
	podSwapUsage              = "pod_swap_usage_bytes"
	resourceScrapeError       = "resource_scrape_error"
)

// resourceMetric describes one series of /metrics/resource.
type resourceMetric struct {
	name string
	// help is the kubelet's text with the stability level its metrics
	// framework puts in front of it, so the HELP lines read as a
	// kubelet's do.
	help   string
	kind   prometheus.ValueType
	labels []string
}

// resourceMetrics are the series a 1.36 kubelet serves on
// /metrics/resource. Its deprecated scrape_error is left out: it was
// deprecated in 1.29 as an alpha metric, so the kubelet's metrics framework
// has hidden it since 1.30, and resource_scrape_error replaces it.
func resourceMetrics() []resourceMetric {
	container := []string{"container", "pod", "namespace"}
	pod := []string{"pod", "namespace"}
	return []resourceMetric{
		{nodeCPUUsage, "[STABLE] Cumulative cpu time consumed by the node in core-seconds", prometheus.CounterValue, nil},
		{nodeMemoryWorkingSet, "[STABLE] Current working set of the node in bytes", prometheus.GaugeValue, nil},
		{nodeSwapUsage, "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", prometheus.GaugeValue, nil},
		{containerStartTime, "[STABLE] Start time of the container since unix epoch in seconds", prometheus.GaugeValue, container},
		{containerCPUUsage, "[STABLE] Cumulative cpu time consumed by the container in core-seconds", prometheus.CounterValue, container},
		{containerMemoryWorkingSet, "[STABLE] Current working set of the container in bytes", prometheus.GaugeValue, container},
		{containerSwapUsage, "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", prometheus.GaugeValue, container},
		{containerSwapLimit, "[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", prometheus.GaugeValue, container},
		{podCPUUsage, "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", prometheus.CounterValue, pod},
		{podMemoryWorkingSet, "[STABLE] Current working set of the pod in bytes", prometheus.GaugeValue, pod},
		{podSwapUsage, "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", prometheus.GaugeValue, pod},
		{resourceScrapeError, "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", prometheus.GaugeValue, nil},
	}
}

// resourceSample is one sample of /metrics/resource as plain data, before
// it becomes a prometheus.Metric.
type resourceSample struct {
	name string
	// labels are the values of the metric's labels, in their order.
	labels []string
	value  float64
	// at is when the stats were read, the sample's timestamp; zero for
	// none, and the scraper uses the time of its scrape.
	at time.Time
}

// resourceSamples turns a Summary into the samples of /metrics/resource as
// the kubelet does: CPU in core-seconds, memory as the working set, each
// with the time of the stats it comes from, and a value the stats lack
// (a nil pointer) left out rather than reported as 0, which metrics-server
// would take for a measurement.
func resourceSamples(s *statsapi.Summary) []resourceSample {
	if s == nil {
		return nil
	}
	var out []resourceSample
	add := func(name string, at metav1.Time, value float64, labels ...string) {
		out = append(out, resourceSample{name: name, labels: labels, value: value, at: at.Time})
	}

	if cpu := s.Node.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		add(nodeCPUUsage, cpu.Time, coreSeconds(*cpu.UsageCoreNanoSeconds))
	}
	if mem := s.Node.Memory; mem != nil && mem.WorkingSetBytes != nil {
		add(nodeMemoryWorkingSet, mem.Time, float64(*mem.WorkingSetBytes))
	}
	// The kubelet stamps the node's swap with the memory's time, which is
	// the same reading in its stats; the swap's own time needs no memory.
	if swap := s.Node.Swap; swap != nil && swap.SwapUsageBytes != nil {
		add(nodeSwapUsage, swap.Time, float64(*swap.SwapUsageBytes))
	}

	for _, pod := range newestPods(s.Pods) {
		name, ns := pod.PodRef.Name, pod.PodRef.Namespace
		for _, c := range pod.Containers {
			// The kubelet gives the start time no timestamp: it is not a
			// reading.
			if c.StartTime.Unix() > 0 {
				add(containerStartTime, metav1.Time{}, float64(c.StartTime.UnixNano())/float64(time.Second), c.Name, name, ns)
			}
			if cpu := c.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
				add(containerCPUUsage, cpu.Time, coreSeconds(*cpu.UsageCoreNanoSeconds), c.Name, name, ns)
			}
			if mem := c.Memory; mem != nil && mem.WorkingSetBytes != nil {
				add(containerMemoryWorkingSet, mem.Time, float64(*mem.WorkingSetBytes), c.Name, name, ns)
			}
			if swap := c.Swap; swap != nil {
				if swap.SwapUsageBytes != nil {
					add(containerSwapUsage, swap.Time, float64(*swap.SwapUsageBytes), c.Name, name, ns)
				}
				// The limit is what is used plus what is still available.
				if swap.SwapAvailableBytes != nil {
					limit := float64(*swap.SwapAvailableBytes)
					if swap.SwapUsageBytes != nil {
						limit += float64(*swap.SwapUsageBytes)
					}
					add(containerSwapLimit, swap.Time, limit, c.Name, name, ns)
				}
			}
		}
		if cpu := pod.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
			add(podCPUUsage, cpu.Time, coreSeconds(*cpu.UsageCoreNanoSeconds), name, ns)
		}
		if mem := pod.Memory; mem != nil && mem.WorkingSetBytes != nil {
			add(podMemoryWorkingSet, mem.Time, float64(*mem.WorkingSetBytes), name, ns)
		}
		if swap := pod.Swap; swap != nil && swap.SwapUsageBytes != nil {
			add(podSwapUsage, swap.Time, float64(*swap.SwapUsageBytes), name, ns)
		}
	}
	return out
}

func coreSeconds(nanos uint64) float64 { return float64(nanos) / float64(time.Second) }

// newestPods keeps, of pods that share a namespace and name, the one that
// started last. Two incarnations of a pod (an edited manifest's old pod
// still stopping next to its replacement) would give the same series
// twice, which the registry refuses; the newer one is what the pod is now.
// The order is kept.
func newestPods(pods []statsapi.PodStats) []statsapi.PodStats {
	type key struct{ namespace, name string }
	newest := make(map[key]int, len(pods))
	for i, p := range pods {
		k := key{p.PodRef.Namespace, p.PodRef.Name}
		if j, ok := newest[k]; !ok || p.StartTime.After(pods[j].StartTime.Time) {
			newest[k] = i
		}
	}
	if len(newest) == len(pods) {
		return pods
	}
	out := make([]statsapi.PodStats, 0, len(newest))
	for i, p := range pods {
		if newest[key{p.PodRef.Namespace, p.PodRef.Name}] == i {
			out = append(out, p)
		}
	}
	return out
}
