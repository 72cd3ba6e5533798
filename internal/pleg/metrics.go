package pleg

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the kubelet's PLEG series. A nil *Metrics records nothing.
type Metrics struct {
	relist   prometheus.Histogram
	lastSeen prometheus.Gauge
}

// NewMetrics creates the PLEG's series and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet",
			Name:      "pleg_relist_duration_seconds",
			Help:      "Duration in seconds of one relist of the runtime by the PLEG, failed ones included.",
			Buckets:   prometheus.DefBuckets,
		}),
		lastSeen: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet",
			Name:      "pleg_last_seen_seconds",
			Help:      "Unix time in seconds of the PLEG's last successful relist.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.relist, m.lastSeen} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register PLEG metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observeRelist(d time.Duration) {
	if m != nil {
		m.relist.Observe(d.Seconds())
	}
}

func (m *Metrics) seen(at time.Time) {
	if m != nil {
		m.lastSeen.Set(float64(at.UnixNano()) / float64(time.Second))
	}
}

// Option configures New.
type Option func(*PLEG)

// WithMetrics records the relists in m.
func WithMetrics(m *Metrics) Option {
	return func(p *PLEG) { p.metrics = m }
}
