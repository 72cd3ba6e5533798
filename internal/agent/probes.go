package agent

import (
	"github.com/berth-dev/berth/internal/prober"
)

// probeVerdicts adapts the probe manager to the pod worker: the worker
// needs to know which probe, if any, condemned a running container.
type probeVerdicts struct{ *prober.Manager }

// Failed names the probe whose failure condemned the container, or "".
func (p probeVerdicts) Failed(containerID string) string {
	if r, ok := p.Liveness(containerID); ok && r == prober.Failure {
		return string(prober.Liveness)
	}
	if r, ok := p.Startup(containerID); ok && r == prober.Failure {
		return string(prober.Startup)
	}
	return ""
}
