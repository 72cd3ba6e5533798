package agent

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/stats"
)

// ContainerMetrics answers /metrics/cadvisor: the latest reading of the
// node, which eviction's periodic one and /stats/summary keep fresh, so a
// scrape seldom reads the node itself.
func (a *apiSource) ContainerMetrics() (*stats.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	return a.stats.Recent(ctx, a.statsMaxAge)
}

// ResourceStats answers /metrics/resource: CPU and memory only.
func (a *apiSource) ResourceStats() (*statsapi.Summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	return a.stats.CPUAndMemory(ctx)
}

// ProbeMetrics answers /metrics/probes.
func (a *apiSource) ProbeMetrics() prometheus.Gatherer { return a.probeMetrics }
