package runtime

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PortForward asks the runtime to prepare port forwarding into a pod
// sandbox's network namespace and returns the URL of the runtime's
// streaming server that serves it, with a single-use token as for Exec.
// req.Port lists the ports of a WebSocket client; it is empty for SPDY,
// where each stream names its own port.
func (s *Service) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	resp, err := s.rs.PortForward(ctx, req)
	if err != nil {
		return "", fmt.Errorf("port forward to pod sandbox %s: %w", req.GetPodSandboxId(), err)
	}
	return resp.GetUrl(), nil
}
