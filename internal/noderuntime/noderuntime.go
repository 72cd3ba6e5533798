// Package noderuntime is the container runtime as one of berth's
// components: the CRI endpoint berth was given, or berth's own managed
// containerd with its CNI network, pause image and imported images; with
// what keeps that runtime in order while berth runs (its supervisor, the
// shim reaper, its task events, the network GC and log rotation).
package noderuntime

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/logs"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// SandboxImage is the image of every pod's sandbox: berth's pause image.
const SandboxImage = imagebuild.PauseImageRef

// stopTimeout bounds stopping the managed containerd.
const stopTimeout = 30 * time.Second

// Options are what Start needs.
type Options struct {
	Config *config.Config
	// Metrics counts every CRI call.
	Metrics prometheus.Registerer
	// Record records the node events of the runtime (its exits and
	// restarts) and of the network GC; nil records none.
	Record containerd.RecordFunc
	Log    *slog.Logger
}

// Runtime is the container runtime berth talks to, and what berth must
// undo at shutdown.
//
// Start connects to it (starting the managed containerd first when no
// endpoint is configured); Run keeps it in order until its context ends;
// Stop, once Run has returned (or when Run never ran), closes the
// connection and stops the managed containerd. Everything else of berth
// starts after Start and stops before Stop: containers keep running
// across it, since their shims outlive containerd.
type Runtime struct {
	// CRI is the connection every other part of berth uses.
	CRI *runtime.Service
	// Name prefixes container IDs ("containerd"); Version is the runtime's
	// own, for the Node's nodeInfo.
	Name, Version string
	Endpoint      string

	clk clock.WithTicker
	log *slog.Logger
	// managed is the managed containerd; nil for an external runtime. Run's
	// supervisor owns it while Run runs.
	managed *containerd.Managed
	// address is managed's containerd socket: it outlives restarts.
	address string
	record  containerd.RecordFunc
	// network collects the managed network's leftovers; nil for an
	// external runtime.
	network *cnigc.Collector
	// net is the managed runtime's pod network; nil for an external one.
	net *podNetwork
	// logs rotates the containers' logs; ownLog the managed containerd's
	// own (nil for an external runtime).
	logs   *logs.Rotator
	ownLog *logs.FileRotator
}

// Start connects to the configured CRI endpoint or, with none, starts
// berth's managed containerd with berth's CNI network, pause image and the
// image tarballs in <root>/images. A Start that fails leaves nothing
// behind.
func Start(ctx context.Context, o Options) (*Runtime, error) {
	cfg, log := o.Config, o.Log
	metrics, err := runtime.NewMetrics(o.Metrics, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	record := o.Record
	if record == nil {
		record = func(string, string, string) {}
	}
	r := &Runtime{Endpoint: cfg.ContainerRuntimeEndpoint, clk: clock.RealClock{}, log: log, record: record}
	if r.Endpoint == "" {
		if err := r.startManaged(ctx, cfg); err != nil {
			return nil, err
		}
	}
	cri, err := runtime.Dial(ctx, r.Endpoint, runtime.WithMetrics(metrics))
	if err != nil {
		r.Stop()
		return nil, err
	}
	r.CRI = cri
	v, err := cri.Version(ctx)
	if err != nil {
		r.Stop()
		return nil, fmt.Errorf("runtime version: %w", err)
	}
	r.Name, r.Version = v.RuntimeName, v.RuntimeVersion
	rc, err := cri.RuntimeConfig(ctx)
	if err := CheckCgroupDriver(cfg.CgroupDriver, rc, err); err != nil {
		r.Stop()
		return nil, err
	}
	if status.Code(err) == codes.Unimplemented {
		log.Info("the runtime does not answer RuntimeConfig (CRI v1.28); berth's cgroupDriver is taken to be its", "cgroupDriver", cfg.CgroupDriver)
	}
	log.Info("container runtime ready", "runtime", v.RuntimeName, "version", v.RuntimeVersion, "endpoint", r.Endpoint)
	if err := r.buildKeepers(cfg); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

func (r *Runtime) startManaged(ctx context.Context, cfg *config.Config) error {
	r.net = &podNetwork{
		cfg: cfg, host: HostMode(cfg), confDir: berthConfDir(cfg), binDir: cfg.CNIBinDir, cidr: InitialPodCIDR(cfg),
		record: r.record, gc: func() *cnigc.Collector { return r.network },
		logInfo: r.log.Info, logWarn: r.log.Warn,
	}
	if r.net.host {
		r.net.confDir = cfg.CNIConfDir
	}
	if err := r.net.start(); err != nil {
		return err
	}
	m, err := containerd.Start(ctx, containerd.Options{
		RootDir:      cfg.RootDir,
		Binary:       cfg.ContainerdBinary,
		CNIConfDir:   r.net.confDir,
		CNIBinDir:    r.net.binDir,
		NetworkLater: r.net.Problem() != "",
		SandboxImage: SandboxImage,
		Log:          r.log,
	})
	if err != nil {
		return fmt.Errorf("start managed containerd: %w", err)
	}
	r.managed, r.address = m, m.Address()
	r.Endpoint = m.Endpoint()

	pause, err := imagebuild.PauseImage(cfg.PauseBinary)
	if err != nil {
		r.Stop()
		return fmt.Errorf("build the pause image from %s: %w", cfg.PauseBinary, err)
	}
	if err := containerd.ImportImage(ctx, m.Address(), m.Snapshotter(), SandboxImage, pause); err != nil {
		r.Stop()
		return fmt.Errorf("import the pause image: %w", err)
	}
	imported, errs := containerd.ImportDir(ctx, m.Address(), m.Snapshotter(), filepath.Join(cfg.RootDir, "images"), r.log)
	for _, err := range errs {
		r.log.Error("image import failed", "err", err)
	}
	if len(imported) > 0 {
		r.log.Info("imported images", "images", imported)
	}
	return nil
}

// buildKeepers builds the network GC and the log rotators. They read the
// managed containerd's paths now, before the supervisor owns it.
func (r *Runtime) buildKeepers(cfg *config.Config) error {
	network, err := newNetworkGC(cfg, r)
	if err != nil {
		return err
	}
	r.network = network
	r.logs, r.ownLog = newLogRotation(cfg, r)
	return nil
}

// CollectNetwork is the network GC's first pass, quiet about what it
// finds; a no-op for an external runtime. It must run before any sandbox
// is in creation: before the pod workers get their first pod.
//
// A containerd berth adopted may have had one of the dead berth's sandboxes
// in flight, but that call's context ended with its connection, which
// fails the creation at its next step (CNI plugin, container, task) long
// before this start-up got here; a creation that failed cleans up what it
// can itself, and what it leaves (a masquerade chain whose DEL found no
// interface) is exactly what this pass is for.
func (r *Runtime) CollectNetwork(ctx context.Context) {
	if r.network != nil {
		r.network.Collect(ctx, true)
	}
}

// Run keeps the runtime in order until ctx ends, then returns once all of
// it has stopped: the network GC, the shim reaper, log rotation, the
// managed containerd's supervisor (which tells the network GC of each
// exit and restart) and its event stream, which calls relist after each
// exit, OOM kill or deletion. Start must have succeeded; the PLEG behind relist is built
// before. Stop follows it.
func (r *Runtime) Run(ctx context.Context, relist func()) {
	var wg sync.WaitGroup
	if r.network != nil {
		wg.Go(func() { r.network.Run(ctx) })
	}
	if r.managed != nil {
		wg.Go(func() { containerd.ReapShims(ctx, r.address, r.clk, r.log) })
	}
	wg.Go(func() { r.logs.Run(ctx) })
	if r.ownLog != nil {
		wg.Go(func() { r.ownLog.Run(ctx) })
	}
	wg.Go(func() { r.supervise(ctx) })
	if r.managed != nil {
		wg.Go(func() { r.watchEvents(ctx, r.address, relist) })
	} else {
		wg.Go(func() { r.watchContainerEvents(ctx, relist) })
	}
	wg.Wait()
}

// supervise keeps the managed containerd running, whether berth started or
// adopted it, until ctx is done (containerd.Supervise); each exit and
// restart is a node event. The CRI connection and the event stream
// reconnect by themselves, and the relist catches up on what happened
// meanwhile. r.managed is this goroutine's until it returns.
func (r *Runtime) supervise(ctx context.Context) {
	if r.managed == nil {
		return
	}
	var observers []containerd.RestartObserver
	if r.network != nil {
		// The network GC reads the network state while containerd is down
		// and collects once it is back.
		observers = append(observers, r.network)
	}
	r.managed = containerd.Supervise(ctx, r.managed, r.clk, r.record, observers...)
}

// watchEvents streams the task events of the containerd at address (the
// managed one, or an external one without GetContainerEvents): an exit or
// an OOM kill is known from the event at once, and each event (an exit,
// an OOM kill, a deletion: containerd.WatchTasks) asks for a relist. When the stream stops for good, the relist still covers it.
func (r *Runtime) watchEvents(ctx context.Context, address string, relist func()) {
	err := containerd.WatchTasks(ctx, address, r.log, func(ev containerd.TaskEvent) {
		switch ev.Topic {
		case containerd.TopicTaskOOM:
			r.CRI.RecordOOM(ev.ContainerID)
		case containerd.TopicTaskExit:
			r.CRI.RecordExit(ev.ContainerID, runtime.Exit{Code: int32(ev.ExitCode), At: ev.At})
		}
		relist()
	})
	if err != nil && ctx.Err() == nil {
		r.log.Warn("containerd event stream stopped; relying on relist", "err", err)
	}
}

// watchContainerEvents streams an external runtime's container events
// (CRI GetContainerEvents: containerd 1.7 and 2, CRI-O): a stopped
// container's exit is known from its event at once, and each stop or
// deletion asks for a relist. A containerd without the call (1.6, Debian 12's) serves
// its own event service on the same socket: its task events are followed
// as the managed containerd's are. Any other runtime without the call
// leaves it to the relist.
func (r *Runtime) watchContainerEvents(ctx context.Context, relist func()) {
	err := r.CRI.WatchContainerEvents(ctx, r.clk, runtime.DefaultEventBackoff, func(ev *runtimeapi.ContainerEventResponse) {
		if x, ok := runtime.ExitOf(ev); ok {
			r.CRI.RecordExit(ev.GetContainerId(), x)
		}
		if asksForRelist(ev.GetContainerEventType()) {
			relist()
		}
	})
	if err == nil {
		return
	}
	if address, ok := containerdAddress(r.Name, r.Endpoint); ok {
		r.log.Info("no CRI container event stream; following containerd's task events on its socket", "err", err, "socket", address)
		r.watchEvents(ctx, address, relist)
		return
	}
	r.log.Info("no container event stream; relying on relist", "err", err)
}

// asksForRelist tells whether a CRI container event is news to berth: a
// container stopped or deleted. One created or started is a pod worker's
// own step, which it read back when it made it; a relist for each made
// most of the relists at start-up (containerd's task events are followed
// for the same topics, containerd.WatchTasks).
func asksForRelist(t runtimeapi.ContainerEventType) bool {
	switch t {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return false
	}
	return true
}

// containerdAddress is the socket of containerd's own API when the CRI
// endpoint is containerd's (one gRPC server answers both): ok is false for
// another runtime or an endpoint that is not a unix socket path.
func containerdAddress(runtimeName, endpoint string) (string, bool) {
	if runtimeName != "containerd" {
		return "", false
	}
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || !filepath.IsAbs(path) {
		return "", false
	}
	return path, true
}

// SetPodCIDR makes cidr the range of new pods: the Node's spec.podCIDR in
// cluster mode. A no-op for an external runtime (its network is its own,
// as the kubelet's UpdatePodCIDR is for a runtime without a CNI template)
// and for the host's CNI configuration.
func (r *Runtime) SetPodCIDR(cidr string) error {
	if r.net == nil {
		return nil
	}
	return r.net.SetPodCIDR(cidr)
}

// StateDir is the managed containerd's state directory, under berth's root
// dir; "" for an external runtime, whose directories are its own.
func (r *Runtime) StateDir() string {
	if r.managed == nil {
		return ""
	}
	return r.managed.StateDir()
}

// NetworkProblem says why berth's view of the pod network keeps new pods
// from getting an address, "" when it sees none (the runtime's own
// NetworkReady condition is read besides).
func (r *Runtime) NetworkProblem() string {
	if r.net == nil {
		return ""
	}
	return r.net.Problem()
}

// Stop closes the CRI connection and stops the managed containerd if berth
// started it. Containers keep running: their shims outlive containerd.
func (r *Runtime) Stop() {
	if r.CRI != nil {
		r.CRI.Close()
	}
	if r.managed == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := r.managed.Stop(ctx); err != nil {
		r.log.Warn("stopping managed containerd failed", "err", err)
	}
}
