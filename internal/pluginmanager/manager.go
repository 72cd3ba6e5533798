// Package pluginmanager registers node plugins the way the kubelet's plugin
// manager does: it watches a directory (the kubelet's
// /var/lib/kubelet/plugins_registry) for unix sockets, asks each new socket
// what it is (GetInfo of k8s.io/kubelet/pkg/apis/pluginregistration/v1),
// hands it to the Handler registered for its type (DRA and CSI drivers),
// and tells the plugin how that went (NotifyRegistrationStatus). A socket
// that vanishes is deregistered; one that is re-created (a driver restart)
// is deregistered and registered again.
//
// The decisions (which sockets to register, deregister or retry) are made
// over plain data by world; the file system (watch.go) and the gRPC calls
// (register.go) are edges behind narrow interfaces.
package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// DefaultDir is where the kubelet, and so every driver, expects the
// registration sockets.
const DefaultDir = "/var/lib/kubelet/plugins_registry"

// The kubelet's timeouts (operationexecutor): to connect, for GetInfo, for
// NotifyRegistrationStatus.
const (
	defaultDialTimeout    = 10 * time.Second
	defaultGetInfoTimeout = time.Second
	defaultNotifyTimeout  = 5 * time.Second
)

// Handler takes the plugins of one type, as the kubelet's
// cache.PluginHandler. Its methods may be called concurrently for different
// sockets, never for the same socket. Unlike the kubelet's, RegisterPlugin
// and DeRegisterPlugin get a context, which ends when Run's does: they must
// return then, since Run waits for them.
type Handler interface {
	// ValidatePlugin says whether the handler takes a plugin with this name,
	// endpoint and supported versions; its error is sent to the plugin.
	ValidatePlugin(name, endpoint string, versions []string) error
	// RegisterPlugin starts using a validated plugin.
	RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error
	// DeRegisterPlugin stops using a plugin whose socket vanished or was
	// replaced.
	DeRegisterPlugin(ctx context.Context, name, endpoint string)
}

// Plugin is a registered plugin, as its GetInfo described it.
type Plugin struct {
	// Socket is the registration socket's path.
	Socket string
	Type   string
	Name   string
	// Endpoint is where the plugin serves its own API: the one GetInfo
	// named, else the registration socket, as in the kubelet.
	Endpoint string
	Versions []string
}

// SocketStatus is what the manager knows of one socket.
type SocketStatus struct {
	Path string
	// Present: the socket is in the directory.
	Present bool
	// Registered is the plugin registered from this socket; nil if none.
	Registered *Plugin
	// Failures counts the failed registrations of the socket file now at
	// Path, and LastError says why the last one failed.
	Failures  int
	LastError string
}

// Options configure a Manager. Zero values take the defaults.
type Options struct {
	// Dir is the directory to watch; DefaultDir if empty.
	Dir   string
	Clock clock.Clock
	Log   *slog.Logger
	// DialTimeout, GetInfoTimeout and NotifyTimeout bound the calls to a
	// plugin; the kubelet's 10s, 1s and 5s by default.
	DialTimeout    time.Duration
	GetInfoTimeout time.Duration
	NotifyTimeout  time.Duration
}

// Manager watches the directory and registers its plugins.
type Manager struct {
	dir      string
	clk      clock.Clock
	log      *slog.Logger
	timeouts timeouts
	// open and dial are the edges; tests may replace them before Run.
	open func(dir string, log *slog.Logger) (source, error)
	dial dialer

	// handlers is written by AddHandler before Run and only read after.
	handlers map[string]Handler
	started  atomic.Bool

	// mu guards status, the loop's last published view of its world.
	mu     sync.Mutex
	status []SocketStatus
}

type timeouts struct {
	dial, getInfo, notify time.Duration
}

// New returns a Manager for opts.Dir; it does nothing until Run.
func New(opts Options) (*Manager, error) {
	dir := opts.Dir
	if dir == "" {
		dir = DefaultDir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin registration directory %q: %w", dir, err)
	}
	m := &Manager{
		dir:      abs,
		clk:      opts.Clock,
		log:      opts.Log,
		timeouts: timeouts{dial: opts.DialTimeout, getInfo: opts.GetInfoTimeout, notify: opts.NotifyTimeout},
		open:     openDir,
		dial:     dialUnix,
		handlers: map[string]Handler{},
	}
	if m.clk == nil {
		m.clk = clock.RealClock{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.log = m.log.With("component", "pluginmanager")
	if m.timeouts.dial <= 0 {
		m.timeouts.dial = defaultDialTimeout
	}
	if m.timeouts.getInfo <= 0 {
		m.timeouts.getInfo = defaultGetInfoTimeout
	}
	if m.timeouts.notify <= 0 {
		m.timeouts.notify = defaultNotifyTimeout
	}
	return m, nil
}

// Dir is the watched directory.
func (m *Manager) Dir() string { return m.dir }

// AddHandler makes h take the plugins whose GetInfo answers pluginType
// (pluginregistration's DRAPlugin, CSIPlugin). Handlers are added before
// Run; one type has one handler.
func (m *Manager) AddHandler(pluginType string, h Handler) error {
	switch {
	case m.started.Load():
		return fmt.Errorf("plugin handler for type %q added after the plugin manager started", pluginType)
	case pluginType == "":
		return errors.New("plugin handler with an empty type")
	case h == nil:
		return fmt.Errorf("plugin handler for type %q is nil", pluginType)
	}
	if _, ok := m.handlers[pluginType]; ok {
		return fmt.Errorf("plugin handler for type %q added twice", pluginType)
	}
	m.handlers[pluginType] = h
	return nil
}

// Status returns what the manager knows of each socket, in path order.
func (m *Manager) Status() []SocketStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.status)
}

// Run creates the directory if needed, registers the plugins whose sockets
// are in it, and follows its changes until ctx ends. It returns an error
// at once if the directory cannot be created or watched, or if Run was
// called before; otherwise it returns nil once ctx has ended and every
// goroutine it started (the watch, the calls to plugins and handlers) has
// stopped. Plugins stay registered with their handlers when it returns, as
// when the kubelet stops.
func (m *Manager) Run(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return errors.New("plugin manager: Run called twice")
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("creating plugin registration directory: %w", err)
	}
	src, err := m.open(m.dir, m.log)
	if err != nil {
		return err
	}
	m.log.Info("watching for plugins", "dir", m.dir)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	events := make(chan dirEvent)
	wg.Go(func() { src.run(ctx, events) })
	m.loop(ctx, &wg, events)
	return nil
}

// loop owns the world: it applies what the directory and the finished
// operations report, and starts the operations the world plans.
func (m *Manager) loop(ctx context.Context, wg *sync.WaitGroup, events <-chan dirEvent) {
	w := newWorld()
	results := make(chan result)
	for {
		now := m.clk.Now()
		for _, a := range w.plan(now) {
			wg.Go(func() { m.operate(ctx, a, results) })
		}
		m.publish(w)
		var timer clock.Timer
		var retry <-chan time.Time
		if at, ok := w.nextRetry(); ok {
			timer = m.clk.NewTimer(at.Sub(now))
			retry = timer.C()
		}
		select {
		case <-ctx.Done():
		case ev := <-events:
			w.apply(ev)
		case r := <-results:
			w.done(r, m.clk.Now())
			m.logResult(r, w.failed[r.path])
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (m *Manager) publish(w *world) {
	st := w.status()
	m.mu.Lock()
	m.status = st
	m.mu.Unlock()
}

// operate runs one operation and reports its result, unless Run is ending.
// A handler that panics fails the operation, not the manager.
func (m *Manager) operate(ctx context.Context, a action, results chan<- result) {
	r := result{action: a}
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("plugin handler panicked: %v", p)
			}
		}()
		switch a.kind {
		case actRegister:
			r.registered, r.err = m.register(ctx, a.path)
		case actDeregister:
			h := m.handlers[a.plugin.Type]
			h.DeRegisterPlugin(ctx, a.plugin.Name, a.plugin.Endpoint)
		}
	}()
	select {
	case results <- r:
	case <-ctx.Done():
	}
}

// logResult logs how an operation ended; f is the socket's failure as
// recorded after it.
func (m *Manager) logResult(r result, f failure) {
	switch {
	case r.kind == actDeregister && r.err != nil:
		m.log.Error("plugin deregistered; its handler failed", "socket", r.path, "type", r.plugin.Type, "name", r.plugin.Name, "err", r.err)
	case r.kind == actDeregister:
		m.log.Info("plugin deregistered", "socket", r.path, "type", r.plugin.Type, "name", r.plugin.Name)
	case r.err == nil:
		m.log.Info("plugin registered", "socket", r.path, "type", r.registered.Type, "name", r.registered.Name,
			"endpoint", r.registered.Endpoint, "versions", r.registered.Versions)
	case f.count == 0:
		m.log.Error("plugin registration failed; its socket is gone", "socket", r.path, "err", r.err)
	default:
		m.log.Error("plugin registration failed; retrying when its socket changes or after a back-off",
			"socket", r.path, "err", r.err, "failures", f.count, "retryIn", retryDelay(f.count))
	}
}
