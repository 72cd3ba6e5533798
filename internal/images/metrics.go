package images

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of the kubelet's image_garbage_collected_total.
const (
	reasonAge   = "age"
	reasonSpace = "space"
)

// Operations counted by berth_image_gc_errors_total.
const (
	opListImages = "list_images"
	opInUse      = "in_use"
	opFsStats    = "fs_stats"
	opRemove     = "remove_image"
)

type metrics struct {
	collected *prometheus.CounterVec
	errors    *prometheus.CounterVec
}

// newMetrics creates the GC's counters and registers them on reg (nil: not
// registered).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		// The kubelet's series, with its name and labels.
		collected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet",
			Name:      "image_garbage_collected_total",
			Help:      "Total number of images garbage collected, by reason: age (imageMaximumGCAge) or space (disk usage, or the eviction path).",
		}, []string{"reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "berth",
			Subsystem: "image_gc",
			Name:      "errors_total",
			Help:      "Runtime calls of the image GC that failed, by operation; each is retried at the next period.",
		}, []string{"operation"}),
	}
	// Series that exist before their first increment read as 0, not absent.
	for _, r := range []string{reasonAge, reasonSpace} {
		m.collected.WithLabelValues(r)
	}
	for _, op := range []string{opListImages, opInUse, opFsStats, opRemove} {
		m.errors.WithLabelValues(op)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.collected, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register image GC metrics: %w", err)
		}
	}
	return m, nil
}
