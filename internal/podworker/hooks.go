package podworker

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/prober/probe"
)

// postStartTimeout bounds a postStart hook; the kubelet has no explicit
// limit, but a hook that never returns must not hold the worker forever.
const postStartTimeout = 2 * time.Minute

// hookUserAgent is what httpGet hooks send, the kubelet's form.
const hookUserAgent = "kube-lifecycle/1.37"

// maxHookOutput is how much of a failed hook's output goes into the message.
const maxHookOutput = 1024

type execer interface {
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error)
}

// runHandler runs a lifecycle hook for container id. An httpGet hook is one
// HTTP probe attempt (same request, ports, TLS and socket handling, as in
// the kubelet) whose failure is the hook's failure.
func runHandler(ctx context.Context, rt execer, http *probe.Runner, h *v1.LifecycleHandler, pod *v1.Pod, c *v1.Container, id, podIP string, timeout time.Duration) error {
	switch {
	case h.Exec != nil:
		stdout, stderr, code, err := rt.ExecSync(ctx, id, h.Exec.Command, timeout)
		if err != nil {
			return fmt.Errorf("exec %q: %w", h.Exec.Command, err)
		}
		if code != 0 {
			out := append(stdout, stderr...)
			if len(out) > maxHookOutput {
				out = out[:maxHookOutput]
			}
			return fmt.Errorf("exec %q exited with %d: %s", h.Exec.Command, code, out)
		}
		return nil
	case h.HTTPGet != nil:
		p := &v1.Probe{
			ProbeHandler:   v1.ProbeHandler{HTTPGet: h.HTTPGet},
			TimeoutSeconds: int32(max(time.Second, timeout) / time.Second),
		}
		result, output, err := http.Run(ctx, p, pod, c, id, podIP)
		if err != nil {
			return fmt.Errorf("http hook: %w", err)
		}
		if result == probe.Failure {
			return fmt.Errorf("http hook: %s", output)
		}
		return nil
	case h.Sleep != nil:
		// Bounded by timeout like the other handlers: a preStop sleep
		// longer than the grace period ends with it (the kubelet stops
		// waiting for the hook then), and is no failure.
		t := time.NewTimer(min(time.Duration(h.Sleep.Seconds)*time.Second, timeout))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("hook has no handler")
}
