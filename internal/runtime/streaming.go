package runtime

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Exec asks the runtime to prepare a streaming exec and returns the URL of
// the runtime's own streaming server that serves it. The URL carries a
// single-use token that expires within a minute or so: the caller connects
// to it at once.
func (s *Service) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	resp, err := s.rs.Exec(ctx, req)
	if err != nil {
		return "", fmt.Errorf("exec in container %s: %w", req.GetContainerId(), err)
	}
	return resp.GetUrl(), nil
}

// Attach is Exec's twin for attaching to the container's main process.
func (s *Service) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	resp, err := s.rs.Attach(ctx, req)
	if err != nil {
		return "", fmt.Errorf("attach to container %s: %w", req.GetContainerId(), err)
	}
	return resp.GetUrl(), nil
}
