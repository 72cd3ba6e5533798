package server

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// resourceCollector serves the kubelet's resource metrics, the series
// metrics-server (v0.6 and later) scrapes from /metrics/resource instead
// of reading /stats/summary. Every Collect measures afresh: the series
// are those of the pods and containers running now, never a gone one's.
type resourceCollector struct {
	summary func() (*statsapi.Summary, error)
	log     *slog.Logger
	descs   map[string]resourceDesc // by metric name
}

type resourceDesc struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

func newResourceCollector(summary func() (*statsapi.Summary, error), log *slog.Logger) *resourceCollector {
	c := &resourceCollector{summary: summary, log: log, descs: map[string]resourceDesc{}}
	for _, m := range resourceMetrics() {
		c.descs[m.name] = resourceDesc{prometheus.NewDesc(m.name, m.help, m.labels, nil), m.kind}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
}

// Collect implements prometheus.Collector. A summary that cannot be had
// is resource_scrape_error 1 and no other series, as in the kubelet: the
// scrape still succeeds, so the scraper sees why it has no numbers.
func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	failed := 0.0
	summary, err := c.summary()
	if err != nil {
		failed = 1
		c.log.Warn("resource metrics unavailable: measuring the node failed", "err", err)
	} else {
		for _, s := range resourceSamples(summary) {
			ch <- constMetric(c.descs[s.name], s)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.descs[resourceScrapeError].desc, prometheus.GaugeValue, failed)
}

// constMetric is the sample as a metric of d, stamped with its time.
func constMetric(d resourceDesc, s resourceSample) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d.desc, d.kind, s.value, s.labels...)
	if err != nil {
		// A label value that is not UTF-8: this series fails, and with
		// ContinueOnError only this one.
		return prometheus.NewInvalidMetric(d.desc, err)
	}
	if s.at.IsZero() {
		return m
	}
	return prometheus.NewMetricWithTimestamp(s.at, m)
}

// resourceMetricsHandler serves /metrics/resource from a registry of its
// own, as the kubelet does, so that these series and only these are there.
func resourceMetricsHandler(summary func() (*statsapi.Summary, error), log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newResourceCollector(summary, log))
	return metricsHandler(reg, log)
}

// metricsHandler serves gatherer's metrics in the Prometheus exposition
// formats.
func metricsHandler(gatherer prometheus.Gatherer, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// One collector or series failing must not hide every other
		// metric.
		ErrorHandling: promhttp.ContinueOnError,
		// A stuck collector must not hold a scrape forever.
		Timeout: metricsTimeout,
	})
}
