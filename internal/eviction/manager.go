package eviction

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// The kubelet's defaults and constants.
const (
	// DefaultMonitoringInterval is how often a pass runs (the kubelet's
	// evictionMonitoringPeriod).
	DefaultMonitoringInterval = 10 * time.Second
	// DefaultPressureTransitionPeriod is how long a pressure condition stays
	// after its signal cleared (evictionPressureTransitionPeriod).
	DefaultPressureTransitionPeriod = 5 * time.Minute
	// immediateEvictionGracePeriodSeconds is the grace period of a pod
	// evicted for a hard threshold: the node needs the resource now.
	immediateEvictionGracePeriodSeconds = 1
	// podCleanupTimeout bounds the wait for an evicted pod to stop, past its
	// grace period, before the next pass may evict again.
	podCleanupTimeout = 30 * time.Second
)

// ReasonEvictionThresholdMet is the reason of the node event recorded when a
// pass starts reclaiming a resource.
const ReasonEvictionThresholdMet = "EvictionThresholdMet"

// Backstops for implementations without deadlines of their own. Reclaiming
// can remove many images, each of which may take a while.
const (
	statsTimeout   = 30 * time.Second
	reclaimTimeout = 5 * time.Minute
)

// SummaryProvider measures the node and its pods.
type SummaryProvider interface {
	Get(ctx context.Context) (*statsapi.Summary, error)
}

// KillPodFunc stops pod with the given grace period, sets its status to
// status (Failed, Evicted, with a DisruptionTarget condition) and returns
// once its containers have stopped. The context bounds the wait.
type KillPodFunc func(ctx context.Context, pod *v1.Pod, gracePeriodSeconds int64, status v1.PodStatus) error

// EventRecorder records events about pods and about the node;
// events.Recorder is one.
type EventRecorder interface {
	Event(pod *v1.Pod, eventType, reason, message string)
	NodeEvent(eventType, reason, message string)
}

// Options configure a Manager.
type Options struct {
	// Thresholds are the eviction thresholds (ParseThresholdConfig, then
	// WithAllocatableThresholds when pods are limited to allocatable).
	Thresholds []Threshold
	// PressureTransitionPeriod is evictionPressureTransitionPeriod; 0 means
	// DefaultPressureTransitionPeriod, as in the kubelet.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds is evictionMaxPodGracePeriod: the most a pod
	// evicted for a soft threshold gets; negative defers to the pod.
	MaxPodGracePeriodSeconds int64
	// MonitoringInterval is how often a pass runs; 0 means
	// DefaultMonitoringInterval.
	MonitoringInterval time.Duration

	Summary    SummaryProvider
	ActivePods func() []*v1.Pod
	KillPod    KillPodFunc
	// ImageGC and ContainerGC free disk before pods are evicted; either may
	// be nil.
	ImageGC     ImageGC
	ContainerGC ContainerGC
	// HasImageFs reports whether the runtime's images are on a filesystem
	// of their own; nil means they are not. It is asked until it answers.
	HasImageFs func(ctx context.Context) (bool, error)

	// LocalStorageCapacityIsolation evicts, every pass, the pods past their
	// own local storage limits (ephemeral-storage, emptyDir sizeLimit), as
	// the kubelet does with the feature of that name on (its default).
	LocalStorageCapacityIsolation bool

	// NodeName is named in node events.
	NodeName string
	Clock    clock.WithTicker
	// Log defaults to slog.Default; Events to recording nothing.
	Log    *slog.Logger
	Events EventRecorder
	// Metrics is where the kubelet's eviction series are registered (nil:
	// nowhere).
	Metrics prometheus.Registerer
}

// Manager is the eviction manager. Passes run one at a time (Run, or
// Synchronize in tests); the views (Admit, Conditions, Status, ...) read a
// snapshot and are safe for concurrent use.
type Manager struct {
	thresholds  []Threshold
	transition  time.Duration
	maxPodGrace int64
	interval    time.Duration
	summary     SummaryProvider
	activePods  func() []*v1.Pod
	killPod     KillPodFunc
	imageGC     ImageGC
	containerGC ContainerGC
	hasImageFs  func(ctx context.Context) (bool, error)
	nodeName    string
	clk         clock.WithTicker
	log         *slog.Logger
	events      EventRecorder
	metrics     *metrics

	// localStorageIsolation is Options.LocalStorageCapacityIsolation.
	localStorageIsolation bool

	// passMu serializes passes and guards the fields below.
	passMu sync.Mutex
	st     state
	// ranks and reclaims are known once the image filesystem is, and
	// withImageFs then says whether images have a filesystem of their own.
	ranks       map[Signal]rankFunc
	withImageFs bool
	reclaims    map[Signal][]reclaimStep

	mu sync.Mutex // guards the snapshot below; never held across a call out
	// conditions are the node's pressure conditions.
	conditions []v1.NodeCondition
	status     Status
}

// New returns a manager for opts, or an error when a dependency is missing.
func New(opts Options) (*Manager, error) {
	if opts.Summary == nil || opts.ActivePods == nil || opts.KillPod == nil || opts.Clock == nil {
		return nil, errors.New("the eviction manager needs stats, the active pods, a way to kill pods and a clock")
	}
	if opts.PressureTransitionPeriod < 0 || opts.MonitoringInterval < 0 {
		return nil, errors.New("the eviction manager's pressure transition period and monitoring interval must not be negative")
	}
	met, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		thresholds:  slices.Clone(opts.Thresholds),
		transition:  cmp.Or(opts.PressureTransitionPeriod, DefaultPressureTransitionPeriod),
		maxPodGrace: opts.MaxPodGracePeriodSeconds,
		interval:    cmp.Or(opts.MonitoringInterval, DefaultMonitoringInterval),
		summary:     opts.Summary,
		activePods:  opts.ActivePods,
		killPod:     opts.KillPod,
		imageGC:     opts.ImageGC,
		containerGC: opts.ContainerGC,
		hasImageFs:  opts.HasImageFs,
		nodeName:    opts.NodeName,
		clk:         opts.Clock,
		log:         opts.Log,
		events:      opts.Events,
		metrics:     met,
		conditions:  initialConditions(),
	}
	m.localStorageIsolation = opts.LocalStorageCapacityIsolation
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.events == nil {
		m.events = noEvents{}
	}
	m.status.Thresholds = thresholdStatuses(m.thresholds, nil, nil, state{})
	return m, nil
}

type noEvents struct{}

func (noEvents) Event(*v1.Pod, string, string, string) {}
func (noEvents) NodeEvent(string, string, string)      {}

// Run runs a pass at once and then every MonitoringInterval until ctx is
// done. After an eviction the next pass runs at once, as in the kubelet:
// the pod has stopped, and fresh stats show whether that was enough.
func (m *Manager) Run(ctx context.Context) {
	m.log.Info("Eviction manager: starting control loop", "thresholds", len(m.thresholds), "interval", m.interval)
	for {
		evicted, err := m.Synchronize(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.log.Error("Eviction manager: failed to synchronize", "err", err)
		}
		if evicted != nil && err == nil {
			continue
		}
		timer := m.clk.NewTimer(m.interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// nodeStatusMessage is the kubelet's message of a node status event.
func (m *Manager) nodeStatusMessage(reason string) string {
	if m.nodeName == "" {
		return fmt.Sprintf("Node status is now: %s", reason)
	}
	return fmt.Sprintf("Node %s status is now: %s", m.nodeName, reason)
}

func podName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

func podNames(pods []*v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, podName(p))
	}
	return out
}
