package agent

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/cm/hierarchy"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/containergc"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/stats"
	"github.com/berth-dev/berth/internal/status"
)

// newContainerGC returns the collector of the dead containers and sandboxes
// of cri.
func newContainerGC(cfg *config.Config, cri *runtime.Service, state podState, clk clock.WithTicker,
	recorder *events.Recorder, registry prometheus.Registerer, log *slog.Logger) (*containergc.Manager, error) {
	c := cfg.ContainerGC
	return containergc.New(containergc.Options{
		Runtime: cri,
		Policy: containergc.Policy{
			MinAge:             c.MinAge,
			MaxPerPodContainer: int(c.MaxPerPodContainer),
			MaxContainers:      int(c.MaxContainers),
		},
		PodState:     state,
		SourcesReady: state.view.ready,
		PodLogsDir:   cfg.PodLogsDir,
		Clock:        clk,
		Log:          log.With("component", "containergc"),
		Events:       recorder,
		Metrics:      registry,
		Period:       c.Period,
	})
}

// podState tells the container GC what may go: everything of a pod berth
// no longer has, and the containers of an evicted pod, which never run
// again.
//
// The kubelet also lets the reclaim path remove the containers of pods that
// completed; berth keeps them, since a completed pod's status is read from
// its containers.
type podState struct {
	view     *podView
	workers  interface{ Has(types.UID) bool }
	statuses *status.Manager
}

func (p podState) ShouldPodContentBeRemoved(uid types.UID) bool {
	if !p.known(uid) {
		return true
	}
	return evicted(p.statuses, uid)
}

// known reports whether berth wants the pod with uid or still holds it (a
// worker is running or killing it).
func (p podState) known(uid types.UID) bool {
	return p.workers.Has(uid) || p.view.wants(uid)
}

func (p podState) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return p.ShouldPodContentBeRemoved(uid)
}

// evicted reports whether the pod was evicted or preempted: it was stopped
// for good and only its status remains.
func evicted(statuses *status.Manager, uid types.UID) bool {
	st, ok := statuses.Get(uid)
	return ok && st.Phase == v1.PodFailed && (st.Reason == eviction.Reason || st.Reason == reasonPreempting)
}

// reasonPreempting is the status reason of a pod preempted to admit a
// critical pod.
const reasonPreempting = "Preempting"

// newEvictionManager returns the eviction manager: it watches the node's
// signals and reclaims or evicts to keep them above the thresholds.
func newEvictionManager(cfg *config.Config, summary *stats.Provider, workers *workerLink,
	statuses *status.Manager, containerGC *containergc.Manager, imageGC *images.Manager, clk clock.WithTicker, recorder *events.Recorder,
	registry prometheus.Registerer, log *slog.Logger) (*eviction.Manager, error) {
	e := cfg.Eviction
	thresholds, err := e.Thresholds()
	if err != nil {
		return nil, err
	}
	if cfg.Resources.EnforcesPods() {
		// Pods are limited to allocatable: evict before the kernel's OOM
		// killer acts within that limit.
		thresholds = eviction.WithAllocatableThresholds(thresholds)
	}
	return eviction.New(eviction.Options{
		Thresholds:               thresholds,
		PressureTransitionPeriod: e.PressureTransitionPeriod,
		MaxPodGracePeriodSeconds: int64(e.MaxPodGracePeriod),
		MonitoringInterval:       e.MonitoringInterval,
		Summary:                  summary,
		ActivePods:               activePods{statuses}.GetPods,
		KillPod: func(ctx context.Context, pod *v1.Pod, grace int64, st v1.PodStatus) error {
			return workers.Evict(ctx, pod.UID, grace, st)
		},
		ImageGC:     imageGC,
		ContainerGC: containerGC,
		HasImageFs:  summary.HasDedicatedImageFs,
		NodeName:    cfg.NodeName,
		Clock:       clk,
		Log:         log.With("component", "eviction"),
		Events:      recorder,
		Metrics:     registry,

		// berth always isolates local storage, as the kubelet by default:
		// the node reports ephemeral-storage capacity and admits on it.
		LocalStorageCapacityIsolation: true,
	})
}

// newStatsProvider measures the node and the active pods, as the kubelet's
// summary provider does.
func newStatsProvider(cfg *config.Config, cri *runtime.Service, statuses *status.Manager,
	cgroups *hierarchy.Hierarchy, clk clock.PassiveClock, log *slog.Logger) *stats.Provider {
	opts := stats.Options{
		Runtime:    cri,
		NodeName:   cfg.NodeName,
		RootDir:    cfg.RootDir,
		PodLogsDir: cfg.PodLogsDir,
		Pods:       activePods{statuses}.GetPods,
		Clock:      clk,
		Log:        log.With("component", "stats"),
	}
	if cgroups != nil {
		opts.PodCgroup = cgroups.CgroupParent
		opts.PodsCgroup = cm.KubepodsCgroup(cfg.Resources.CgroupRoot).ToCgroupfs()
	}
	return stats.New(opts)
}
