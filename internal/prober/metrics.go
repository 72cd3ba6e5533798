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
	// own holds the two families alone, for /metrics/probes: the kubelet
	// serves them there, from a registry of their own.
	own *prometheus.Registry
	// refs counts the workers sharing one label set, so a pod replaced
	// under the same name does not lose its series to the old one's removal.
	// Guarded by Manager.mu.
	refs map[metricLabels]int
}

// metricLabels identifies one probe's counter series.
type metricLabels struct {
	probeType, container, pod, namespace, podUID string
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober",
			Name:      "probe_total",
			Help:      "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober",
			Name:      "probe_duration_seconds",
			Help:      "Duration in seconds for a probe response.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
		refs: map[metricLabels]int{},
		own:  prometheus.NewRegistry(),
	}
	// berth keeps them on /metrics too (reg), where its own benchmarks
	// have always read them; the kubelet has them on /metrics/probes only.
	for _, r := range []prometheus.Registerer{m.own, reg} {
		if r == nil {
			continue
		}
		for _, c := range []prometheus.Collector{m.probes, m.duration} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("register prober metrics: %w", err)
			}
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
		successful: m.probes.WithLabelValues(l.probeType, resultSuccessful, l.container, l.pod, l.namespace, l.podUID),
		failed:     m.probes.WithLabelValues(l.probeType, resultFailed, l.container, l.pod, l.namespace, l.podUID),
		unknown:    m.probes.WithLabelValues(l.probeType, resultUnknown, l.container, l.pod, l.namespace, l.podUID),
		duration:   m.duration.WithLabelValues(l.probeType, l.container, l.pod, l.namespace),
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
		m.probes.DeleteLabelValues(l.probeType, r, l.container, l.pod, l.namespace, l.podUID)
	}
	// The histogram has no pod_uid: a pod replaced under the same name
	// shares it, and it goes when no worker of that name is left.
	for k := range m.refs {
		if k.probeType == l.probeType && k.container == l.container && k.pod == l.pod && k.namespace == l.namespace {
			return
		}
	}
	m.duration.DeleteLabelValues(l.probeType, l.container, l.pod, l.namespace)
}

// Gatherer is the prober's metrics alone, as /metrics/probes serves them.
func (m *Manager) Gatherer() prometheus.Gatherer { return m.metrics.own }
