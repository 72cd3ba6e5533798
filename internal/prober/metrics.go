package prober

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// The kubelet's prober metrics, with its names and label values.
const (
	resultSuccessful = "successful"
	resultFailed     = "failed"
	resultUnknown    = "unknown"
)

type metrics struct {
	probes   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// refs counts the workers sharing one label set, so a pod replaced
	// under the same name does not lose its series to the old one's removal.
	// Guarded by Manager.mu.
	refs map[metricLabels]int
}

// metricLabels identifies one probe's counter series.
type metricLabels struct {
	probeType, container, pod, namespace string
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober",
			Name:      "probe_total",
			Help:      "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober",
			Name:      "probe_duration_seconds",
			Help:      "Duration in seconds for a probe response.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"probe_type"}),
		refs: map[metricLabels]int{},
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.probes, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register prober metrics: %w", err)
		}
	}
	return m, nil
}

// workerMetrics are one worker's series, resolved once so an attempt does
// no label lookups.
type workerMetrics struct {
	successful, failed, unknown prometheus.Counter
	duration                    prometheus.Observer
}

// acquire returns the series of a label set and counts one more user.
// Caller holds Manager.mu.
func (m *metrics) acquire(l metricLabels) workerMetrics {
	m.refs[l]++
	return workerMetrics{
		successful: m.probes.WithLabelValues(l.probeType, resultSuccessful, l.container, l.pod, l.namespace),
		failed:     m.probes.WithLabelValues(l.probeType, resultFailed, l.container, l.pod, l.namespace),
		unknown:    m.probes.WithLabelValues(l.probeType, resultUnknown, l.container, l.pod, l.namespace),
		duration:   m.duration.WithLabelValues(l.probeType),
	}
}

// release drops a user of the label set, and the series with the last.
// Caller holds Manager.mu.
func (m *metrics) release(l metricLabels) {
	if m.refs[l]--; m.refs[l] > 0 {
		return
	}
	delete(m.refs, l)
	for _, r := range []string{resultSuccessful, resultFailed, resultUnknown} {
		m.probes.DeleteLabelValues(l.probeType, r, l.container, l.pod, l.namespace)
	}
}
