package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/events"
)

// The kubelet's periods.
const (
	// ImageListPeriod is how often the runtime's images are detected.
	ImageListPeriod = 30 * time.Second
	// ImageGCPeriod is how often the periodic GC runs.
	ImageGCPeriod = 5 * time.Minute
)

// ReasonImageGarbageCollected is the reason of the node event recorded for
// every image the GC removes. It is berth's: the kubelet only logs removals.
const ReasonImageGarbageCollected = "ImageGarbageCollected"

// callTimeout bounds each call the manager makes through its interfaces, a
// backstop for implementations without their own deadline. Removing an image
// can take a while: the runtime may delete its content synchronously.
const callTimeout = 2 * time.Minute

// Runtime is the slice of the CRI image service the GC needs.
type Runtime interface {
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, imageID string) error
}

// FsStats reports the capacity and available bytes of the filesystem that
// holds the runtime's images.
type FsStats func(ctx context.Context) (capacity, available uint64, err error)

// InUse returns the references of the images in use right now: those of
// every container the runtime has (running or exited), of every pod berth
// wants to run and of the pulls in progress. A reference is an image ID
// ("sha256:..."), a name with or without tag ("busybox",
// "berth.local/busybox:1.35") or a digest; names match the runtime's as it
// normalizes them ("busybox" is "docker.io/library/busybox:latest").
type InUse func(ctx context.Context) ([]string, error)

// EventRecorder records events about the node.
type EventRecorder interface {
	NodeEvent(eventType, reason, message string)
}

// Options configure a Manager.
type Options struct {
	Policy  Policy
	Runtime Runtime
	FsStats FsStats
	InUse   InUse
	// SandboxImage is pinned, and named so in Images' verdicts.
	SandboxImage string
	// Pinned are other images never collected, matched like InUse's
	// references. Images the runtime reports pinned are never collected
	// either.
	Pinned []string
	Clock  clock.WithTicker
	// Log defaults to slog.Default; Events to recording nothing.
	Log    *slog.Logger
	Events EventRecorder
	// Metrics is where the GC's counters are registered (nil: nowhere).
	Metrics prometheus.Registerer
	// GCPeriod is how often the periodic GC runs; 0 means ImageGCPeriod.
	GCPeriod time.Duration
}

// Manager detects images and collects the unused ones. Its methods are safe
// for concurrent use.
type Manager struct {
	policy   Policy
	runtime  Runtime
	fsStats  FsStats
	inUse    InUse
	pins     pins
	clk      clock.WithTicker
	gcPeriod time.Duration
	log      *slog.Logger
	events   EventRecorder
	metrics  *metrics
	// began is when the manager was made: imageMaximumGCAge removes nothing
	// until berth has run that long, as the images it found at start were
	// last used at an unknown time.
	began time.Time

	// gcMu serializes GarbageCollect and DeleteUnusedImages: each removes
	// what it chose from its own detection, and two at once would choose
	// the same images and count their bytes twice.
	gcMu sync.Mutex

	mu sync.Mutex // guards the fields below; never held across a call out
	// records are the images of the latest detection, by ID.
	records map[string]*imageRecord
	// initialized is set by the first periodic detection that succeeded.
	initialized bool
}

// NewManager returns a manager for opts, or an error when the policy is
// invalid or a dependency is missing.
func NewManager(opts Options) (*Manager, error) {
	if err := opts.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("image garbage collection policy: %w", err)
	}
	if opts.Runtime == nil || opts.FsStats == nil || opts.InUse == nil || opts.Clock == nil {
		return nil, errors.New("image garbage collection needs a runtime, filesystem stats, images in use and a clock")
	}
	met, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		policy:   opts.Policy,
		runtime:  opts.Runtime,
		fsStats:  opts.FsStats,
		inUse:    opts.InUse,
		pins:     pins{sandbox: newRefSet(opts.SandboxImage), configured: newRefSet(opts.Pinned...)},
		clk:      opts.Clock,
		gcPeriod: opts.GCPeriod,
		log:      opts.Log,
		events:   opts.Events,
		metrics:  met,
		began:    opts.Clock.Now(),
		records:  map[string]*imageRecord{},
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.gcPeriod <= 0 {
		m.gcPeriod = ImageGCPeriod
	}
	if m.events == nil {
		m.events = noEvents{}
	}
	return m, nil
}

type noEvents struct{}

func (noEvents) NodeEvent(string, string, string) {}

// Run detects images every ImageListPeriod and garbage collects every
// GCPeriod (ImageGCPeriod by default), both at once on start, until ctx is done. As in the kubelet,
// the periodic GC is off when imageGCHighThresholdPercent is 100 and
// imageMaximumGCAge is 0. Failures are logged and retried at the next period; a GC that
// fails twice in a row or more is also an ImageGCFailed node event.
func (m *Manager) Run(ctx context.Context) {
	periodic := m.policy.periodic()
	if !periodic {
		m.log.Info("Periodic image garbage collection is off: imageGCHighThresholdPercent is 100 and imageMaximumGCAge is 0; unused images are still deleted under disk pressure")
	}
	// One ticker drives both, and each tick is exactly one round: a GC when
	// the tick is due for one (a GC detects images itself), else a
	// detection. Deciding by the tick's own time rather than the clock's
	// means a tick that waited while a round ran starts one round, never
	// two. nextGC is read before the ticker starts, so that the tick due at
	// nextGC is never a moment before it.
	nextGC := m.clk.Now()
	ticker := m.clk.NewTicker(min(ImageListPeriod, m.gcPeriod))
	defer ticker.Stop()
	m.detectPeriodically(ctx)
	prevFailed := false
	tick := nextGC
	for {
		if periodic && !tick.Before(nextGC) {
			prevFailed = m.collectPeriodically(ctx, prevFailed)
			for !nextGC.After(tick) {
				nextGC = nextGC.Add(m.gcPeriod)
			}
		}
		select {
		case <-ctx.Done():
			return
		case tick = <-ticker.C():
		}
		if !periodic || tick.Before(nextGC) {
			m.detectPeriodically(ctx)
		}
	}
}

// detectPeriodically is the seed's periodic detection: the first one that
// succeeds records the images it finds as detected at the zero time, so that
// what was there before berth started is not protected by
// imageMinimumGCAge.
func (m *Manager) detectPeriodically(ctx context.Context) {
	if err := m.detectImages(ctx, time.Time{}, true); err != nil && ctx.Err() == nil {
		m.log.Warn("Failed to detect images; retrying at the next period", "err", err)
	}
}

// collectPeriodically runs one periodic GC and returns whether it failed.
// As in the kubelet, a single failure is only logged (stats may not be ready
// yet); repeated ones are a node event.
func (m *Manager) collectPeriodically(ctx context.Context, prevFailed bool) (failed bool) {
	err := m.GarbageCollect(ctx)
	switch {
	case ctx.Err() != nil:
		return prevFailed
	case err != nil && prevFailed:
		m.log.Error("Image garbage collection failed multiple times in a row", "err", err)
		m.events.NodeEvent(v1.EventTypeWarning, events.ImageGCFailed, err.Error())
		return true
	case err != nil:
		m.log.Warn("Image garbage collection failed once; stats initialization may not have completed yet", "err", err)
		return true
	case prevFailed:
		m.log.Info("Image garbage collection succeeded")
	default:
		m.log.Debug("Image garbage collection succeeded")
	}
	return false
}

// detectImages lists the runtime's images, then the images in use, and
// records both (the seed's detectImages). Images seen for the first time are
// recorded as detected at detectTime (a GC's detection passes the GC's time);
// a periodic detection ignores detectTime and uses the zero time until one
// has succeeded, the current time after. When either call fails the records
// are left as they were.
func (m *Manager) detectImages(ctx context.Context, detectTime time.Time, periodic bool) error {
	// The detection's time is when it began: what it finds in use was in
	// use then, and a GC's detection stays at or after the GC's time.
	now := m.clk.Now()
	// The images are listed before asking what is in use, so that an image
	// listed but taken into use meanwhile is seen in use.
	images, err := call(ctx, m.runtime.ListImages)
	if err != nil {
		m.metrics.errors.WithLabelValues(opListImages).Inc()
		return fmt.Errorf("list images: %w", err)
	}
	refs, err := call(ctx, m.inUse)
	if err != nil {
		m.metrics.errors.WithLabelValues(opInUse).Inc()
		return fmt.Errorf("list images in use: %w", err)
	}
	inUse := newRefSet(refs...)
	m.mu.Lock()
	defer m.mu.Unlock()
	if periodic {
		if m.initialized {
			detectTime = now
		}
		m.initialized = true
	}
	observe(m.records, images, inUse, m.pins, detectTime, now)
	return nil
}

// snapshot copies the records, for decisions made without the lock.
func (m *Manager) snapshot() []imageRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]imageRecord, 0, len(m.records))
	for _, r := range m.records {
		out = append(out, *r)
	}
	return out
}

// call runs f with a context bounded by callTimeout.
func call[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return f(ctx)
}
