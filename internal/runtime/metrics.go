package runtime

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"
)

// Metrics counts and times every unary CRI call on a connection, under the
// kubelet's names and operation_type values, so that dashboards and alerts
// written for the kubelet read berth unchanged. Being a gRPC interceptor, it
// sees the calls of every user of the connection (pod workers, probes, GC,
// stats), wrapped by Service or not.
type Metrics struct {
	clk        clock.PassiveClock
	operations *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	errors     *prometheus.CounterVec
}

// NewMetrics creates the runtime-operation series and registers them on reg
// (nil: not registered). clk times the calls.
func NewMetrics(reg prometheus.Registerer, clk clock.PassiveClock) (*Metrics, error) {
	m := &Metrics{
		clk: clk,
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet",
			Name:      "runtime_operations_total",
			Help:      "Cumulative number of CRI calls to the container runtime, by operation type.",
		}, []string{"operation_type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet",
			Name:      "runtime_operations_duration_seconds",
			Help:      "Duration in seconds of CRI calls to the container runtime, by operation type.",
			// The kubelet's buckets: 5 ms up to about 12 minutes, which an
			// image pull can take.
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 14),
		}, []string{"operation_type"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet",
			Name:      "runtime_operations_errors_total",
			Help:      "Cumulative number of CRI calls to the container runtime that returned an error, by operation type.",
		}, []string{"operation_type"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.operations, m.duration, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register runtime operation metrics: %w", err)
		}
	}
	return m, nil
}

// intercept is a grpc.UnaryClientInterceptor. The call counts once it has
// returned, as in the kubelet, so a call still in flight is not yet seen.
func (m *Metrics) intercept(ctx context.Context, method string, req, reply any,
	cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	op := operationType(method)
	start := m.clk.Now()
	err := invoke(ctx, method, req, reply, cc, opts...)
	m.operations.WithLabelValues(op).Inc()
	m.duration.WithLabelValues(op).Observe(m.clk.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(op).Inc()
	}
	return err
}

// operationType is the kubelet's operation_type of a CRI method, given its
// gRPC name ("/runtime.v1.RuntimeService/RunPodSandbox"): the method in
// snake_case, with "PodSandbox" as one word (run_podsandbox,
// list_podsandbox_stats), except where the kubelet's instrumented service
// chose another name.
func operationType(fullMethod string) string {
	name := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	switch name {
	case "UpdateContainerResources":
		return "update_container"
	}
	return snakeCase(strings.ReplaceAll(name, "PodSandbox", "Podsandbox"))
}

// snakeCase turns a CamelCase identifier into snake_case: a word starts at
// each capital that follows a lower-case letter or a digit.
func snakeCase(s string) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range s {
		if unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
		prev = r
	}
	return b.String()
}
