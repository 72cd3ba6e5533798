package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

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
	opts     containerd.Options // how managed was started, to start it again
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
		Name:      "berth",
		Interface: cfg.CNIBridge,
		PodCIDR:   cfg.PodCIDR,
		IPAMDir:   filepath.Join(cfg.RootDir, "cni", "ipam"),
	})
	if err != nil {
		return err
	}
	h.opts = containerd.Options{
		RootDir:      cfg.RootDir,
		CNIConfDir:   cniConfDir,
		SandboxImage: imagebuild.PauseImageRef,
		Log:          log,
	}
	m, err := containerd.Start(ctx, h.opts)
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

// supervise restarts the managed containerd when it dies, with a growing
// delay, until ctx is done. The CRI connection and the event stream
// reconnect by themselves; running containers never noticed (their shims
// outlive containerd), and the relist catches up on what happened meanwhile.
func (h *runtimeHandle) supervise(ctx context.Context, log *slog.Logger) {
	if h.managed == nil {
		return
	}
	delay := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.managed.Done():
		}
		log.Error("managed containerd exited; restarting it", "log", h.managed.LogPath())
		for {
			m, err := containerd.Start(ctx, h.opts)
			if err == nil {
				h.managed, delay = m, time.Second
				break
			}
			log.Error("restarting managed containerd failed", "err", err, "retryIn", delay)
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			delay = min(2*delay, 30*time.Second)
		}
	}
}
