package noderuntime

import (
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/logs"
)

// runtimeLogCheckInterval is how often the managed containerd's own log is
// measured: a stat, and containerd can log megabytes a second (one line per
// failed write on a full disk).
const runtimeLogCheckInterval = time.Second

// newLogRotation returns what keeps container logs within
// containerLogMaxSize and containerLogMaxFiles, for the managed and an
// external runtime alike (both are reached through the CRI), and the
// managed containerd's own log within the same policy (nil for an external
// runtime). It reads the managed containerd's log path, so it must be
// built before the supervisor owns r.managed.
func newLogRotation(cfg *config.Config, r *Runtime) (*logs.Rotator, *logs.FileRotator) {
	l := cfg.ContainerLogs
	policy := logs.Policy{MaxSize: l.MaxSize, MaxFiles: int(l.MaxFiles)}
	log := r.log.With("component", "logrotation")
	containers := logs.NewRotator(r.CRI, logs.RotatorOptions{
		Policy:   policy,
		Workers:  int(l.MaxWorkers),
		Interval: l.MonitorInterval,
		Clock:    r.clk,
		Log:      log,
		LogFile:  func(c *runtimeapi.Container) string { return kuberuntime.ContainerLogFile(cfg.PodLogsDir, c) },
	})
	if r.managed == nil {
		return containers, nil
	}
	return containers, logs.NewFileRotator(r.managed.LogPath(), policy, runtimeLogCheckInterval, r.clk, log)
}
