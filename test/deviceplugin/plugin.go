// Package deviceplugin is a device plugin for tests: it speaks the
// kubelet's device plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1)
// the way the upstream sample plugin and NVIDIA's do (serve on a socket in
// the plugin directory, register on kubelet.sock, register again whenever
// the agent restarts), and lets a test steer its answers and read back what
// the agent asked.
package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Plugin is one device plugin. Its methods are safe for concurrent use.
type Plugin struct {
	cfg Config
	log *slog.Logger

	// life serialises Start, Stop, Restart, Register and the watch loop's
	// reactions, which may block on a Register call; it guards the fields
	// below.
	life   sync.Mutex
	srv    *server            // nil when not serving
	cancel context.CancelFunc // nil when not started
	done   chan struct{}      // closed once the latest watch loop has shut everything down

	// mu guards what the handlers and the test controls share; it is never
	// held across I/O.
	mu             sync.Mutex
	devices        []Device
	unhealthy      map[string]bool
	failAllocate   string
	shortAllocate  bool
	calls          Calls
	devicesChanged chan struct{} // closed and replaced when devices or health change
	callsChanged   chan struct{} // closed and replaced when calls change
}

// New checks cfg and returns a stopped plugin.
func New(cfg Config) (*Plugin, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// The handlers read Mounts without a lock: keep the caller's away.
	mounts := make(map[string][]*pluginapi.Mount, len(cfg.Mounts))
	for id, ms := range cfg.Mounts {
		mounts[id] = cloneAll(ms)
	}
	cfg.Mounts = mounts
	return &Plugin{
		cfg:            cfg,
		log:            cfg.Logger.With("resource", cfg.ResourceName, "socket", cfg.SocketName),
		devices:        cloneDevices(cfg.Devices),
		unhealthy:      map[string]bool{},
		devicesChanged: make(chan struct{}),
		callsChanged:   make(chan struct{}),
	}, nil
}

// SocketPath is where the plugin serves.
func (p *Plugin) SocketPath() string { return filepath.Join(p.cfg.Dir, p.cfg.SocketName) }

func (p *Plugin) kubeletSocket() string { return filepath.Join(p.cfg.Dir, kubeletSocketName) }

// Start serves the plugin, registers it and keeps it registered across agent
// restarts until Stop is called or ctx ends: ctx bounds the plugin's life,
// not only the start. If the registration fails, Start returns its error and
// leaves nothing running.
func (p *Plugin) Start(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.cancel != nil {
		return errors.New("deviceplugin: already started")
	}
	// Watch before registering, so that an agent restart right after the
	// registration is not missed.
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("deviceplugin: watching %s: %w", p.cfg.Dir, err)
	}
	if err := w.Add(p.cfg.Dir); err != nil {
		w.Close()
		return fmt.Errorf("deviceplugin: watching %s: %w", p.cfg.Dir, err)
	}
	if err := p.serveLocked(); err != nil {
		w.Close()
		return err
	}
	err = p.registerLocked(ctx)
	p.recordRegistration(err)
	if err != nil {
		p.stopServingLocked()
		w.Close()
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	p.cancel, p.done = cancel, make(chan struct{})
	go p.run(runCtx, w, p.done)
	return nil
}

// Stop stops serving, removes the socket and waits until every goroutine
// the plugin started has returned. It is a no-op on a stopped plugin.
func (p *Plugin) Stop() {
	p.life.Lock()
	cancel, done := p.cancel, p.done
	p.life.Unlock()
	if done == nil {
		return
	}
	if cancel != nil { // nil when ctx has ended the plugin already
		cancel()
	}
	<-done
}

// Restart does what a restart of the plugin's pod does: stop serving,
// remove the socket, serve again and register again.
func (p *Plugin) Restart(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.cancel == nil {
		return errors.New("deviceplugin: restart: not started")
	}
	p.log.Info("restarting")
	p.stopServingLocked()
	if err := p.serveLocked(); err != nil {
		return err
	}
	err := p.registerLocked(ctx)
	p.recordRegistration(err)
	return err
}

// Register registers the running plugin once more, as configured.
func (p *Plugin) Register(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.srv == nil {
		return errors.New("deviceplugin: register: not serving")
	}
	err := p.registerLocked(ctx)
	p.recordRegistration(err)
	return err
}

// registerLocked sends the configured registration; the caller records
// the outcome.
func (p *Plugin) registerLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RPCTimeout)
	defer cancel()
	err := SendRegistration(ctx, p.kubeletSocket(), &pluginapi.RegisterRequest{
		Version:      p.cfg.RegisterVersion,
		Endpoint:     p.cfg.RegisterEndpoint,
		ResourceName: p.cfg.ResourceName,
		Options:      p.options(),
	})
	if err != nil {
		return fmt.Errorf("deviceplugin: %w", err)
	}
	p.log.Info("registered", "kubeletSocket", p.kubeletSocket())
	return nil
}

func (p *Plugin) options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{
		PreStartRequired:                p.cfg.PreStartRequired,
		GetPreferredAllocationAvailable: p.cfg.GetPreferredAllocationAvailable,
	}
}

// server is one life of the plugin's gRPC server.
type server struct {
	grpc   *grpc.Server
	served chan error // Serve's result
	path   string
	file   os.FileInfo // the socket this server created, to tell it from a newer one
}

// serveLocked starts a server on a fresh socket.
func (p *Plugin) serveLocked() error {
	path := p.SocketPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deviceplugin: removing stale socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("deviceplugin: %w", err)
	}
	// The plugin removes its socket itself, and only if it is still the one
	// it created: an unlink by path could remove a successor's.
	ln.SetUnlinkOnClose(false)
	file, err := os.Stat(path)
	if err != nil {
		ln.Close()
		return fmt.Errorf("deviceplugin: %w", err)
	}
	// WaitForHandlers makes Stop wait for the ListAndWatch streams to return.
	g := grpc.NewServer(grpc.WaitForHandlers(true))
	pluginapi.RegisterDevicePluginServer(g, &service{p: p})
	s := &server{grpc: g, served: make(chan error, 1), path: path, file: file}
	go func() { s.served <- g.Serve(ln) }()
	p.srv = s
	p.log.Info("serving", "path", path)
	return nil
}

// stopServingLocked stops the server, if any, and removes its socket.
func (p *Plugin) stopServingLocked() {
	s := p.srv
	if s == nil {
		return
	}
	p.srv = nil
	s.grpc.Stop()
	if err := <-s.served; err != nil {
		p.log.Error("serving failed", "err", err)
	}
	if s.ownsSocket() {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.log.Error("removing socket", "err", err)
		}
	}
}

// ownsSocket tells whether the file at the socket path is still the one
// this server created.
func (s *server) ownsSocket() bool {
	fi, err := os.Stat(s.path)
	return err == nil && os.SameFile(fi, s.file)
}

func cloneDevices(devs []Device) []Device {
	out := slices.Clone(devs)
	for i := range out {
		out[i].NUMA = slices.Clone(out[i].NUMA)
	}
	return out
}
