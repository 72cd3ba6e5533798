package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ReopenContainerLog asks the runtime to close the container's log file and
// open a new one at the same path: the second half of a log rotation, after
// the file was renamed away.
func (s *Service) ReopenContainerLog(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	_, err := s.rs.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	return err
}
