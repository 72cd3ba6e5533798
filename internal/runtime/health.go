package runtime

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statusTimeout bounds the health check's Status call: a runtime that does
// not answer a status request in seconds is not healthy.
const statusTimeout = 5 * time.Second

// RuntimeReady returns nil when the runtime answers and says it is ready
// (its RuntimeReady condition), as the kubelet's runtime health check asks.
func (s *Service) RuntimeReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	resp, err := s.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("runtime status: %w", err)
	}
	return runtimeReady(resp.GetStatus())
}

// runtimeReady reads the RuntimeReady condition of a runtime's status.
func runtimeReady(status *runtimeapi.RuntimeStatus) error {
	for _, c := range status.GetConditions() {
		if c.GetType() != runtimeapi.RuntimeReady {
			continue
		}
		if c.GetStatus() {
			return nil
		}
		return fmt.Errorf("the runtime is not ready: %s: %s", c.GetReason(), c.GetMessage())
	}
	return fmt.Errorf("the runtime reports no %s condition", runtimeapi.RuntimeReady)
}
