package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/expansion"
)

// runExec runs the probe's command in the container through the runtime:
// exit status 0 succeeds, any other fails, and so does a command that
// outlives the timeout.
func (r *Runner) runExec(ctx context.Context, a *v1.ExecAction, c *v1.Container, containerID string, timeout time.Duration) (Result, string, error) {
	if r.exec == nil {
		return Unknown, "", errors.New("exec: no runtime to run the command")
	}
	if len(a.Command) == 0 {
		return Unknown, "", errors.New("exec.command: empty")
	}
	cmd := expandCommand(a.Command, c.Env)
	stdout, stderr, code, err := r.exec.ExecSync(ctx, containerID, cmd, timeout)
	if err != nil {
		// The runtime kills a command that outlives its timeout and answers
		// DeadlineExceeded; a context deadline on the call means the same.
		if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
			return Failure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " ")), nil
		}
		return Unknown, "", fmt.Errorf("exec %v in container %s: %w", cmd, containerID, err)
	}
	out := combinedOutput(stdout, stderr)
	if code != 0 {
		return Failure, fmt.Sprintf("command %v exited with %d: %s", cmd, code, out), nil
	}
	return Success, out, nil
}

// combinedOutput is stdout then stderr, at most maxOutput bytes of them (the
// runtime returns the two streams apart, so they cannot be interleaved).
func combinedOutput(stdout, stderr []byte) string {
	out := make([]byte, 0, min(len(stdout)+len(stderr), maxOutput))
	out = append(out, stdout[:min(len(stdout), maxOutput)]...)
	out = append(out, stderr[:min(len(stderr), maxOutput-len(out))]...)
	return string(out)
}

// expandCommand replaces $(NAME) in each word of cmd with the value of the
// container's env var NAME as written in the spec (the kubelet's
// ExpandContainerCommandOnlyStatic): values are not expanded themselves, an
// env var set from valueFrom counts as empty, and a later declaration wins.
func expandCommand(cmd []string, env []v1.EnvVar) []string {
	values := make(map[string]string, len(env))
	for _, e := range env {
		values[e.Name] = e.Value
	}
	out := make([]string, len(cmd))
	for i, word := range cmd {
		out[i] = expansion.Expand(word, expansion.MapLookup(values))
	}
	return out
}
