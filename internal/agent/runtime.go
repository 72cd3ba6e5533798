package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// runtimeHandle is the container runtime berth talks to, and what berth must
// undo at shutdown.
type runtimeHandle struct {
	cri      *runtime.Service
	name     string // runtime name for container IDs, e.g. "containerd"
	version  string // the runtime's own version, for the Node's nodeInfo
	endpoint string
	managed  *containerd.Managed
	// watchEvents streams the runtime's own events, calling notify for each;
	// nil when the runtime offers none (the relist still covers it).
	watchEvents func(ctx context.Context, notify func())
}

// startRuntime connects to the configured CRI endpoint or, with none, starts
// berth's managed containerd with berth's CNI network, pause image and the
// image tarballs in <root>/images. Every CRI call is counted on reg.
func startRuntime(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*runtimeHandle, error) {
	metrics, err := runtime.NewMetrics(reg, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	h := &runtimeHandle{endpoint: cfg.ContainerRuntimeEndpoint}
	if h.endpoint == "" {
		if err := h.startManaged(ctx, cfg, log); err != nil {
			return nil, err
		}
	}
	cri, err := runtime.Dial(ctx, h.endpoint, runtime.WithMetrics(metrics))
	if err != nil {
		h.stop(log)
		return nil, err
	}
	h.cri = cri
	v, err := cri.Version(ctx)
	if err != nil {
		h.stop(log)
		return nil, fmt.Errorf("runtime version: %w", err)
	}
	h.name, h.version = v.RuntimeName, v.RuntimeVersion
	log.Info("container runtime ready", "runtime", v.RuntimeName, "version", v.RuntimeVersion, "endpoint", h.endpoint)
	if h.managed != nil {
		address := h.managed.Address()
		h.watchEvents = func(ctx context.Context, notify func()) {
			err := containerd.WatchTasks(ctx, address, log, func(ev containerd.TaskEvent) {
				switch ev.Topic {
				case containerd.TopicTaskOOM:
					cri.RecordOOM(ev.ContainerID)
				case containerd.TopicTaskExit:
					cri.RecordExit(ev.ContainerID, runtime.Exit{Code: int32(ev.ExitCode), At: ev.At})
				}
				notify()
			})
			if err != nil && ctx.Err() == nil {
				log.Warn("containerd event stream stopped; relying on relist", "err", err)
			}
		}
	}
	return h, nil
}

func (h *runtimeHandle) startManaged(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	cniConfDir := filepath.Join(cfg.RootDir, "cni", "net.d")
	err := network.WriteConfList(cniConfDir, network.Bridge{
		Name:      cniNetworkName,
		Interface: cfg.CNIBridge,
		PodCIDR:   cfg.PodCIDR,
		IPAMDir:   cniIPAMDir(cfg),
	})
	if err != nil {
		return err
	}
	m, err := containerd.Start(ctx, containerd.Options{
		RootDir:      cfg.RootDir,
		CNIConfDir:   cniConfDir,
		SandboxImage: imagebuild.PauseImageRef,
		Log:          log,
	})
	if err != nil {
		return fmt.Errorf("start managed containerd: %w", err)
	}
	h.managed = m
	h.endpoint = m.Endpoint()

	pause, err := imagebuild.PauseImage(cfg.PauseBinary)
	if err != nil {
		h.stop(log)
		return fmt.Errorf("build the pause image from %s: %w", cfg.PauseBinary, err)
	}
	if err := containerd.ImportImage(ctx, m.Address(), m.Snapshotter(), imagebuild.PauseImageRef, pause); err != nil {
		h.stop(log)
		return fmt.Errorf("import the pause image: %w", err)
	}
	imported, errs := containerd.ImportDir(ctx, m.Address(), m.Snapshotter(), filepath.Join(cfg.RootDir, "images"), log)
	for _, err := range errs {
		log.Error("image import failed", "err", err)
	}
	if len(imported) > 0 {
		log.Info("imported images", "images", imported)
	}
	return nil
}

// stop closes the CRI connection and stops the managed containerd if berth
// started it. Containers keep running: their shims outlive containerd.
func (h *runtimeHandle) stop(log *slog.Logger) {
	if h.cri != nil {
		h.cri.Close()
	}
	if h.managed == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := h.managed.Stop(ctx); err != nil {
		log.Warn("stopping managed containerd failed", "err", err)
	}
}

// shimReaper returns the loop that kills the shims the managed containerd
// forgets while it runs (containerd.ReapShims), or nil without a managed
// runtime. It reads the address at once, before supervise owns h.managed;
// the address outlives restarts.
func (h *runtimeHandle) shimReaper(clk clock.WithTicker, log *slog.Logger) func(context.Context) {
	if h.managed == nil {
		return nil
	}
	address := h.managed.Address()
	return func(ctx context.Context) { containerd.ReapShims(ctx, address, clk, log) }
}

// supervise keeps the managed containerd running, whether berth started or
// adopted it, until ctx is done (containerd.Supervise); each exit and
// restart is a node event. The CRI connection and the event stream
// reconnect by themselves, and the relist catches up on what happened
// meanwhile. h.managed is this goroutine's until it returns.
func (h *runtimeHandle) supervise(ctx context.Context, record containerd.RecordFunc) {
	if h.managed == nil {
		return
	}
	h.managed = containerd.Supervise(ctx, h.managed, clock.RealClock{}, record)
}

// stopping marks an error of a start-up that ctx's end cut short (a CRI
// call cancelled by SIGTERM) as that end's consequence, so that berth
// exits as from any stop it was asked for, without an error.
func stopping(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return err
}
