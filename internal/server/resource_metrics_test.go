package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The test stats' times, in Unix seconds: the CPU, memory and swap of one
// reading carry different times, so a sample stamped with the wrong one
// shows.
const (
	cpuSecond  = 1772359200 // 2026-03-01T10:00:00Z
	memSecond  = cpuSecond + 1
	swapSecond = cpuSecond + 2
)

func cpuStats(coreNanos uint64) *statsapi.CPUStats {
	return &statsapi.CPUStats{Time: metav1.Unix(cpuSecond, 0), UsageCoreNanoSeconds: new(coreNanos), UsageNanoCores: new(uint64(1))}
}

func memStats(workingSet uint64) *statsapi.MemoryStats {
	return &statsapi.MemoryStats{Time: metav1.Unix(memSecond, 0), WorkingSetBytes: new(workingSet), UsageBytes: new(workingSet + 1)}
}

func testPodStats(namespace, name string, started time.Time, containers ...statsapi.ContainerStats) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef:     statsapi.PodReference{Namespace: namespace, Name: name, UID: "uid-" + name},
		StartTime:  metav1.NewTime(started),
		Containers: containers,
	}
}

func TestResourceSamples(t *testing.T) {
	started := time.Date(2026, 3, 1, 9, 0, 0, 500_000_000, time.UTC)
	startedSeconds := float64(started.UnixNano()) / 1e9

	full := testPodStats("default", "web", started, statsapi.ContainerStats{
		Name: "app", StartTime: metav1.NewTime(started),
		CPU: cpuStats(2_500_000_000), Memory: memStats(4096),
	})
	full.CPU, full.Memory = cpuStats(3_000_000_000), memStats(8192)

	// A container whose runtime reports nothing yet, in a pod whose
	// cgroup could not be read.
	bare := testPodStats("default", "bare", started, statsapi.ContainerStats{
		Name:   "app",
		CPU:    &statsapi.CPUStats{Time: metav1.Unix(cpuSecond, 0)},
		Memory: &statsapi.MemoryStats{Time: metav1.Unix(memSecond, 0), UsageBytes: new(uint64(7))},
	})

	swap := func(usage, available *uint64) *statsapi.SwapStats {
		return &statsapi.SwapStats{Time: metav1.Unix(swapSecond, 0), SwapUsageBytes: usage, SwapAvailableBytes: available}
	}
	swapped := testPodStats("kube-system", "swapper", started,
		statsapi.ContainerStats{Name: "both", Swap: swap(new(uint64(100)), new(uint64(900)))},
		statsapi.ContainerStats{Name: "limit-only", Swap: swap(nil, new(uint64(500)))},
		statsapi.ContainerStats{Name: "none", Swap: swap(nil, nil)},
	)
	swapped.Swap = swap(new(uint64(100)), nil)

	old := testPodStats("default", "edited", started, statsapi.ContainerStats{Name: "app", CPU: cpuStats(1e9)})
	replacement := testPodStats("default", "edited", started.Add(time.Minute), statsapi.ContainerStats{Name: "app", CPU: cpuStats(2e9)})

	tests := []struct {
		name    string
		summary *statsapi.Summary
		want    []resourceSample
	}{
		{name: "no summary", summary: nil, want: nil},
		{
			name: "node",
			summary: &statsapi.Summary{Node: statsapi.NodeStats{
				CPU: cpuStats(1_234_500_000_000), Memory: memStats(2 << 30),
				Swap: &statsapi.SwapStats{Time: metav1.Unix(swapSecond, 0), SwapUsageBytes: new(uint64(1 << 20))},
			}},
			want: []resourceSample{
				{name: nodeCPUUsage, value: 1234.5, at: time.Unix(cpuSecond, 0)},
				{name: nodeMemoryWorkingSet, value: 2 << 30, at: time.Unix(memSecond, 0)},
				{name: nodeSwapUsage, value: 1 << 20, at: time.Unix(swapSecond, 0)},
			},
		},
		{
			name: "node stats without the values",
			summary: &statsapi.Summary{Node: statsapi.NodeStats{
				CPU:    &statsapi.CPUStats{Time: metav1.Unix(cpuSecond, 0), UsageNanoCores: new(uint64(5))},
				Memory: &statsapi.MemoryStats{Time: metav1.Unix(memSecond, 0), AvailableBytes: new(uint64(5))},
				Swap:   &statsapi.SwapStats{Time: metav1.Unix(swapSecond, 0), SwapAvailableBytes: new(uint64(5))},
			}},
			want: nil,
		},
		{
			name:    "pod and container",
			summary: &statsapi.Summary{Pods: []statsapi.PodStats{full}},
			want: []resourceSample{
				{name: containerStartTime, labels: []string{"app", "web", "default"}, value: startedSeconds},
				{name: containerCPUUsage, labels: []string{"app", "web", "default"}, value: 2.5, at: time.Unix(cpuSecond, 0)},
				{name: containerMemoryWorkingSet, labels: []string{"app", "web", "default"}, value: 4096, at: time.Unix(memSecond, 0)},
				{name: podCPUUsage, labels: []string{"web", "default"}, value: 3, at: time.Unix(cpuSecond, 0)},
				{name: podMemoryWorkingSet, labels: []string{"web", "default"}, value: 8192, at: time.Unix(memSecond, 0)},
			},
		},
		{name: "nil values and no start time", summary: &statsapi.Summary{Pods: []statsapi.PodStats{bare}}, want: nil},
		{
			name:    "swap",
			summary: &statsapi.Summary{Pods: []statsapi.PodStats{swapped}},
			want: []resourceSample{
				{name: containerSwapUsage, labels: []string{"both", "swapper", "kube-system"}, value: 100, at: time.Unix(swapSecond, 0)},
				{name: containerSwapLimit, labels: []string{"both", "swapper", "kube-system"}, value: 1000, at: time.Unix(swapSecond, 0)},
				{name: containerSwapLimit, labels: []string{"limit-only", "swapper", "kube-system"}, value: 500, at: time.Unix(swapSecond, 0)},
				{name: podSwapUsage, labels: []string{"swapper", "kube-system"}, value: 100, at: time.Unix(swapSecond, 0)},
			},
		},
		{
			name: "stats without a time give samples without a timestamp",
			summary: &statsapi.Summary{Node: statsapi.NodeStats{
				Memory: &statsapi.MemoryStats{WorkingSetBytes: new(uint64(10))},
			}},
			want: []resourceSample{{name: nodeMemoryWorkingSet, value: 10}},
		},
		{
			name:    "two incarnations of a pod: the newer one",
			summary: &statsapi.Summary{Pods: []statsapi.PodStats{replacement, old}},
			want: []resourceSample{
				{name: containerCPUUsage, labels: []string{"app", "edited", "default"}, value: 2, at: time.Unix(cpuSecond, 0)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sampleStrings(resourceSamples(tt.summary))
			if want := sampleStrings(tt.want); !slices.Equal(got, want) {
				t.Errorf("samples:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// sampleStrings renders samples one per line, sorted, so that tests compare
// what is sampled and not in which order.
func sampleStrings(samples []resourceSample) []string {
	out := make([]string, 0, len(samples))
	for _, s := range samples {
		at := "none"
		if !s.at.IsZero() {
			at = s.at.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, fmt.Sprintf("%s%q %v @%s", s.name, s.labels, s.value, at))
	}
	slices.Sort(out)
	return out
}

// Every sample names a metric that is described, with a value for each of
// its labels.
func TestResourceSamplesMatchTheirMetrics(t *testing.T) {
	labels := map[string]int{}
	for _, m := range resourceMetrics() {
		labels[m.name] = len(m.labels)
	}
	c := testPodStats("ns", "p", time.Unix(100, 0), statsapi.ContainerStats{
		Name: "c", StartTime: metav1.NewTime(time.Unix(100, 0)), CPU: cpuStats(1), Memory: memStats(1),
		Swap: &statsapi.SwapStats{SwapUsageBytes: new(uint64(1)), SwapAvailableBytes: new(uint64(1))},
	})
	c.CPU, c.Memory, c.Swap = cpuStats(1), memStats(1), &statsapi.SwapStats{SwapUsageBytes: new(uint64(1))}
	summary := &statsapi.Summary{
		Node: statsapi.NodeStats{CPU: cpuStats(1), Memory: memStats(1), Swap: &statsapi.SwapStats{SwapUsageBytes: new(uint64(1))}},
		Pods: []statsapi.PodStats{c},
	}
	seen := map[string]bool{}
	for _, s := range resourceSamples(summary) {
		n, ok := labels[s.name]
		if !ok || n != len(s.labels) {
			t.Errorf("sample %s with %d labels: described %v with %d", s.name, len(s.labels), ok, n)
		}
		seen[s.name] = true
	}
	// Every metric but the scrape error comes from a full summary.
	if len(seen) != len(labels)-1 {
		t.Errorf("a full summary gives %d of the %d metrics: %v", len(seen), len(labels)-1, seen)
	}
}
