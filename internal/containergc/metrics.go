package containergc

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Objects counted by berth_container_gc_removed_total.
const (
	objContainer = "container"
	objSandbox   = "sandbox"
	objPodLogDir = "pod_log_dir"
)

// Operations counted by berth_container_gc_errors_total.
const (
	opListContainers  = "list_containers"
	opListSandboxes   = "list_sandboxes"
	opReadPodLogsDir  = "read_pod_logs_dir"
	opStopContainer   = "stop_container"
	opContainerStatus = "container_status"
	opRemoveLog       = "remove_container_log"
	opRemoveContainer = "remove_container"
	opStopSandbox     = "stop_sandbox"
	opRemoveSandbox   = "remove_sandbox"
	opRemovePodLogDir = "remove_pod_log_dir"
)

type metrics struct {
	removed *prometheus.CounterVec
	errors  *prometheus.CounterVec
}

// newMetrics creates the GC's counters and registers them on reg (nil: not
// registered). The kubelet has no container GC series; these are berth's.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "berth",
			Subsystem: "container_gc",
			Name:      "removed_total",
			Help:      "Objects the container GC removed, by object: container, sandbox or pod_log_dir.",
		}, []string{"object"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "berth",
			Subsystem: "container_gc",
			Name:      "errors_total",
			Help:      "Operations of the container GC that failed, by operation; each is retried at the next pass.",
		}, []string{"operation"}),
	}
	// Series that exist before their first increment read as 0, not absent.
	for _, o := range []string{objContainer, objSandbox, objPodLogDir} {
		m.removed.WithLabelValues(o)
	}
	for _, op := range []string{opListContainers, opListSandboxes, opReadPodLogsDir, opStopContainer, opContainerStatus,
		opRemoveLog, opRemoveContainer, opStopSandbox, opRemoveSandbox, opRemovePodLogDir} {
		m.errors.WithLabelValues(op)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.removed, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register container GC metrics: %w", err)
		}
	}
	return m, nil
}
