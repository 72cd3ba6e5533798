package containergc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/runtime"
)

// DefaultPeriod is the kubelet's ContainerGCPeriod.
const DefaultPeriod = time.Minute

// Runtime is the slice of the CRI runtime service the GC needs.
type Runtime interface {
	ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error)
	StopContainer(ctx context.Context, id string, gracePeriod int64) error
	RemoveContainer(ctx context.Context, id string) error
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
}

var _ Runtime = (*runtime.Service)(nil)

// EventRecorder records events about the node.
type EventRecorder interface {
	NodeEvent(eventType, reason, message string)
}

// Options configure a Manager.
type Options struct {
	Runtime  Runtime
	Policy   Policy
	PodState PodState
	// SourcesReady says every pod source has been read at least once.
	SourcesReady func() bool
	// PodLogsDir holds the pods' log directories. Only log files inside it
	// are ever removed.
	PodLogsDir string
	Clock      clock.WithTicker
	// Log defaults to slog.Default; Events to recording nothing.
	Log    *slog.Logger
	Events EventRecorder
	// Metrics is where the GC's counters are registered (nil: nowhere).
	Metrics prometheus.Registerer
	// Period is how often Run collects; 0 means DefaultPeriod.
	Period time.Duration
}

// Result counts what a pass removed, or found already gone.
type Result struct {
	Containers, Sandboxes, PodLogDirs int
}

// Manager collects dead containers and sandboxes. Its methods are safe for
// concurrent use; passes run one at a time.
type Manager struct {
	runtime      Runtime
	policy       Policy
	pods         PodState
	sourcesReady func() bool
	podLogsDir   string
	clk          clock.WithTicker
	period       time.Duration
	log          *slog.Logger
	events       EventRecorder
	metrics      *metrics
	// pass is held by the running pass: the periodic one and the eviction
	// manager's reclaim would otherwise choose the same containers and
	// race to remove them. A channel, so that waiting heeds the context.
	pass chan struct{}
}

// New returns a manager for opts, or an error when the policy is invalid
// or a dependency is missing.
func New(opts Options) (*Manager, error) {
	if err := opts.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("container garbage collection policy: %w", err)
	}
	if opts.Runtime == nil || opts.PodState == nil || opts.SourcesReady == nil || opts.Clock == nil {
		return nil, errors.New("container garbage collection needs a runtime, the pods' state, the sources' readiness and a clock")
	}
	if !filepath.IsAbs(opts.PodLogsDir) {
		return nil, fmt.Errorf("container garbage collection: pod logs directory %q: must be an absolute path", opts.PodLogsDir)
	}
	if opts.Period < 0 {
		return nil, fmt.Errorf("container garbage collection: period %s: must not be negative", opts.Period)
	}
	met, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		runtime:      opts.Runtime,
		policy:       opts.Policy,
		pods:         opts.PodState,
		sourcesReady: opts.SourcesReady,
		podLogsDir:   filepath.Clean(opts.PodLogsDir),
		clk:          opts.Clock,
		period:       opts.Period,
		log:          opts.Log,
		events:       opts.Events,
		metrics:      met,
		pass:         make(chan struct{}, 1),
	}
	if m.period == 0 {
		m.period = DefaultPeriod
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.events == nil {
		m.events = noEvents{}
	}
	return m, nil
}

type noEvents struct{}

func (noEvents) NodeEvent(string, string, string) {}

// Run collects at once and then every Period until ctx is done. As in the
// kubelet, every failed pass is logged and recorded as a ContainerGCFailed
// node event, and the first success after a failure is logged at Info.
func (m *Manager) Run(ctx context.Context) {
	ticker := m.clk.NewTicker(m.period)
	defer ticker.Stop()
	failed := false
	for {
		failed = m.collectPeriodically(ctx, failed)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// collectPeriodically runs one periodic pass and returns whether it failed.
func (m *Manager) collectPeriodically(ctx context.Context, prevFailed bool) (failed bool) {
	err := m.GarbageCollect(ctx)
	switch {
	case ctx.Err() != nil:
		return prevFailed
	case err != nil:
		m.log.Error("Container garbage collection failed", "err", err)
		m.events.NodeEvent(v1.EventTypeWarning, events.ContainerGCFailed, err.Error())
		return true
	case prevFailed:
		m.log.Info("Container garbage collection succeeded")
	default:
		m.log.Debug("Container garbage collection succeeded")
	}
	return false
}
