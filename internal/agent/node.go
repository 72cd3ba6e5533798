package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/eviction"
)

// Node answers /node: the node as the kubelet would report it to an API
// server, with the conditions the eviction manager sets.
func (a *apiSource) Node() v1.Node {
	var n v1.Node
	n.Name = a.loop.cfg.NodeName
	n.Status.Capacity = a.capacity.DeepCopy()
	n.Status.Allocatable = a.allocatable.DeepCopy()
	n.Status.Conditions = a.evictions.Conditions()
	return n
}

// Eviction answers /node/eviction.
func (a *apiSource) Eviction() eviction.Status { return a.evictions.Status() }

// StatsSummary answers /stats/summary.
func (a *apiSource) StatsSummary() (*statsapi.Summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	return a.stats.Get(ctx)
}
