package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/logs"
)

// runtimeLogCheckInterval is how often the managed containerd's own log is
// measured: a stat, and containerd can log megabytes a second (one line per
// failed write on a full disk).
const runtimeLogCheckInterval = time.Second

// startLogRotation keeps container logs within containerLogMaxSize and
// containerLogMaxFiles, for the managed and an external runtime alike (both
// are reached through the CRI), and the managed containerd's own log within
// the same policy. It must run before rt.supervise, which owns rt.managed
// from then on.
func startLogRotation(ctx context.Context, bg *sync.WaitGroup, cfg *config.Config, rt *runtimeHandle,
	clk clock.WithTicker, log *slog.Logger) {
	l := cfg.ContainerLogs
	policy := logs.Policy{MaxSize: l.MaxSize, MaxFiles: int(l.MaxFiles)}
	log = log.With("component", "logrotation")
	containers := logs.NewRotator(rt.cri, logs.RotatorOptions{
		Policy:   policy,
		Workers:  int(l.MaxWorkers),
		Interval: l.MonitorInterval,
		Clock:    clk,
		Log:      log,
	})
	bg.Go(func() { containers.Run(ctx) })
	if rt.managed != nil {
		own := logs.NewFileRotator(rt.managed.LogPath(), policy, runtimeLogCheckInterval, clk, log)
		bg.Go(func() { own.Run(ctx) })
	}
}
