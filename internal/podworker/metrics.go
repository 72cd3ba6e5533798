package podworker

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// The kubelet's operation_type values of kubelet_pod_worker_duration_seconds.
const (
	syncCreate = "create" // the first sync of a pod its worker was given
	syncUpdate = "update" // the first sync after the worker was given a new spec
	syncSync   = "sync"   // any other sync: an event, a retry, the resync period
	syncKill   = "kill"   // stopping the pod: deleted, evicted or preempted
)

// The kubelet's container_type values of kubelet_started_containers_total.
const (
	typeContainer     = "container"
	typeInitContainer = "init_container"
)

// podStartBuckets are the kubelet's buckets for pod start-up durations: half
// a second to an hour, round numbers that SLOs are written against.
func podStartBuckets() []float64 {
	return []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
}

// Metrics are the pod workers' series. A nil *Metrics records nothing, so
// workers built without it (tests, tools) need no special case.
type Metrics struct {
	syncs         *prometheus.HistogramVec
	podStart      prometheus.Histogram
	started       *prometheus.CounterVec
	startErrors   *prometheus.CounterVec
	podStartPhase *prometheus.HistogramVec
}

// NewMetrics creates the pod workers' series and registers them on reg
// (nil: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		syncs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet",
			Name:      "pod_worker_duration_seconds",
			Help:      "Duration in seconds of one sync of one pod by its worker, by operation type: create, update, sync or kill.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"operation_type"}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet",
			Name:      "pod_start_duration_seconds",
			Help:      "Duration in seconds from berth seeing a pod (its worker starting) to the pod running, once per pod.",
			Buckets:   podStartBuckets(),
		}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet",
			Name:      "started_containers_total",
			Help:      "Cumulative number of containers berth tried to start, by container type.",
		}, []string{"container_type"}),
		startErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet",
			Name:      "started_containers_errors_total",
			Help:      "Cumulative number of containers that failed to start, by container type and the waiting reason it left (ErrImagePull, CreateContainerError, RunContainerError...).",
		}, []string{"container_type", "code"}),
		podStartPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "berth",
			Name:      "pod_start_phase_duration_seconds",
			Help: "Time one pod's start spent in each phase, observed with kubelet_pod_start_duration_seconds: admission " +
				"(seen to admitted), then the successful sandbox, image pulls, container creations and starts, each summed over the pod's containers.",
			// The runtime operations' buckets: a phase lasts from milliseconds
			// (a create) to minutes (a pull).
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 14),
		}, []string{"phase"}),
	}
	// Series that exist before their first sample read as 0, not absent.
	for _, typ := range []string{typeContainer, typeInitContainer} {
		m.started.WithLabelValues(typ)
	}
	for p := range numStartPhases {
		m.podStartPhase.WithLabelValues(p.String())
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.syncs, m.podStart, m.started, m.startErrors, m.podStartPhase} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register pod worker metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) synced(op string, d time.Duration) {
	if m != nil {
		m.syncs.WithLabelValues(op).Observe(d.Seconds())
	}
}

// containerStarted counts one pass of startContainer, from the waiting
// reason it left the container with ("": started).
func (m *Metrics) containerStarted(init bool, waitingReason string) {
	if m == nil {
		return
	}
	attempted, code := startOutcome(waitingReason)
	if !attempted {
		return
	}
	typ := typeContainer
	if init {
		typ = typeInitContainer
	}
	m.started.WithLabelValues(typ).Inc()
	if code != "" {
		m.startErrors.WithLabelValues(typ, code).Inc()
	}
}

func (m *Metrics) podStarted(s podStart) {
	if m == nil {
		return
	}
	m.podStart.Observe(s.total.Seconds())
	for p, d := range s.phases {
		m.podStartPhase.WithLabelValues(startPhase(p).String()).Observe(d.Seconds())
	}
}

// syncOperation is the kubelet's operation_type of a worker's pass over its
// pod. lastSynced is the spec the previous sync ran with (nil: none yet).
func syncOperation(pod, lastSynced *v1.Pod, terminating, evicting bool) string {
	switch {
	case terminating || evicting:
		return syncKill
	case lastSynced == nil:
		return syncCreate
	case pod != lastSynced:
		return syncUpdate
	}
	return syncSync
}

// startOutcome reads what startContainer did from the waiting reason it
// left: a crash-loop back-off means it did not try (the kubelet counts a
// start only past that check), any other reason is the failure's code (the
// kubelet's codes are these reasons), and none is a container started.
func startOutcome(waitingReason string) (attempted bool, code string) {
	if waitingReason == reasonCrashLoopBackOff {
		return false, ""
	}
	return true, waitingReason
}
