package dra

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/pluginmanager"
)

// DefaultWipeDelay is how long a driver's ResourceSlices outlive its last
// registration (the kubelet's defaultWipingDelay): a driver that restarts
// within it keeps them.
const DefaultWipeDelay = 30 * time.Second

// The retries of a failed wipe: the kubelet's 1 s doubling to 5 min.
const (
	wipeRetryInitial = time.Second
	wipeRetryMax     = 5 * time.Minute
	wipeCallTimeout  = 10 * time.Second
)

// wipeAll is the pending key of the wipe of every driver's slices.
const wipeAll = ""

// wipes are the pending wipes of the node's ResourceSlices: by driver
// (wipeAll for every driver), when each is due. Its functions return a new
// value and leave their argument alone.
type wipes map[string]time.Time

// scheduled is w with driver's wipe due at at.
func (w wipes) scheduled(driver string, at time.Time) wipes {
	out := make(wipes, len(w)+1)
	for k, v := range w {
		out[k] = v
	}
	out[driver] = at
	return out
}

// cancelled is w without driver's wipe: the driver registered again.
func (w wipes) cancelled(driver string) wipes {
	if _, ok := w[driver]; !ok {
		return w
	}
	out := make(wipes, len(w))
	for k, v := range w {
		if k != driver {
			out[k] = v
		}
	}
	return out
}

// due splits w at now: the drivers whose wipe is due (sorted), and how
// long until the next of the others (0 for none).
func (w wipes) due(now time.Time) (drivers []string, next time.Duration) {
	for d, at := range w {
		if !at.After(now) {
			drivers = append(drivers, d)
			continue
		}
		if wait := at.Sub(now); next == 0 || wait < next {
			next = wait
		}
	}
	slices.Sort(drivers)
	return drivers, next
}

// SliceWiper deletes this node's ResourceSlices of drivers that are not
// there, as the kubelet's DRA plugin manager does: every driver's when
// berth starts (none has registered yet, and pods must not be scheduled
// here for devices no driver can prepare), and a driver's DefaultWipeDelay
// after its registration went unless it registered again. Its Handler is
// the DRA drivers' handler that tells it of registrations.
type SliceWiper struct {
	client kubernetes.Interface
	node   string
	clk    clock.WithTicker
	delay  time.Duration
	log    *slog.Logger
	retry  *flowcontrol.Backoff
	kick   chan struct{}

	mu      sync.Mutex
	pending wipes
}

// NewSliceWiper returns a wiper of node's slices with every driver's wipe
// due now; it does nothing until Run.
func NewSliceWiper(client kubernetes.Interface, node string, clk clock.WithTicker, log *slog.Logger) *SliceWiper {
	return &SliceWiper{client: client, node: node, clk: clk, delay: DefaultWipeDelay, log: log,
		retry: flowcontrol.NewFakeBackOffWithJitter(wipeRetryInitial, wipeRetryMax, clk, 0),
		kick:  make(chan struct{}, 1), pending: wipes{wipeAll: clk.Now()}}
}

func (w *SliceWiper) update(f func(wipes) wipes) {
	w.mu.Lock()
	w.pending = f(w.pending)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run deletes the slices whose wipe is due until ctx is done. A failed
// delete is tried again after a back-off.
func (w *SliceWiper) Run(ctx context.Context) {
	for {
		next := w.wipeDue(ctx)
		var timeout <-chan time.Time
		var timer clock.Timer
		if next > 0 {
			timer = w.clk.NewTimer(next)
			timeout = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-timeout:
		case <-w.kick:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// wipeDue deletes the slices whose wipe is due and returns when the next
// one is (0: none pending).
func (w *SliceWiper) wipeDue(ctx context.Context) time.Duration {
	w.mu.Lock()
	due, _ := w.pending.due(w.clk.Now())
	w.mu.Unlock()
	for _, driver := range due {
		if ctx.Err() != nil {
			return 0
		}
		at := w.clk.Now()
		if err := w.wipe(ctx, driver); err != nil {
			w.retry.Next(driver, at)
			retryAt := at.Add(w.retry.Get(driver))
			w.log.Warn("deleting the node's ResourceSlices failed; will retry", "driver", driver, "err", err)
			w.update(func(p wipes) wipes { return p.scheduled(driver, retryAt) })
			continue
		}
		w.retry.Reset(driver)
		// Unless the driver went again meanwhile, with a wipe due later.
		w.update(func(p wipes) wipes {
			if !p[driver].After(at) {
				return p.cancelled(driver)
			}
			return p
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, next := w.pending.due(w.clk.Now())
	return next
}

// wipe deletes the node's slices of driver (every driver's for wipeAll).
func (w *SliceWiper) wipe(ctx context.Context, driver string) error {
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: w.node}
	if driver != wipeAll {
		sel[resourceapi.ResourceSliceSelectorDriver] = driver
	}
	ctx, cancel := context.WithTimeout(ctx, wipeCallTimeout)
	defer cancel()
	err := w.client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	w.log.Info("deleted the node's ResourceSlices of a driver not registered", "driver", driver)
	return nil
}

// Handler is plugins with the wiper told of each registration: a driver
// that registers keeps its slices, one whose registration goes has them
// deleted after the delay unless it comes back.
func (w *SliceWiper) Handler(plugins *Plugins) pluginmanager.Handler {
	return wipingHandler{Plugins: plugins, w: w}
}

type wipingHandler struct {
	*Plugins
	w *SliceWiper
}

func (h wipingHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	if err := h.Plugins.RegisterPlugin(ctx, name, endpoint, versions); err != nil {
		return err
	}
	h.w.update(func(p wipes) wipes { return p.cancelled(name) })
	return nil
}

func (h wipingHandler) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	h.Plugins.DeRegisterPlugin(ctx, name, endpoint)
	if slices.Contains(h.Plugins.Registered(), name) {
		return // registered again at another endpoint
	}
	at := h.w.clk.Now().Add(h.w.delay)
	h.w.update(func(p wipes) wipes { return p.scheduled(name, at) })
}
