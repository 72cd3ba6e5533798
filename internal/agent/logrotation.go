package agent

import (
	"log/slog"

	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/logs"
)

// newLogRotator keeps container logs within containerLogMaxSize and
// containerLogMaxFiles, for the managed and an external runtime alike: both
// are reached through the CRI.
func newLogRotator(cfg *config.Config, cri logs.Runtime, clk clock.WithTicker, log *slog.Logger) *logs.Rotator {
	l := cfg.ContainerLogs
	return logs.NewRotator(cri, logs.RotatorOptions{
		Policy:   logs.Policy{MaxSize: l.MaxSize, MaxFiles: int(l.MaxFiles)},
		Workers:  int(l.MaxWorkers),
		Interval: l.MonitorInterval,
		Clock:    clk,
		Log:      log.With("component", "logrotation"),
	})
}
