package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// ErrNoContainerEvents is WatchContainerEvents' answer for a runtime
// without the CRI's GetContainerEvents (containerd before 1.7): the
// relist alone must do.
var ErrNoContainerEvents = errors.New("the runtime does not stream container events (CRI GetContainerEvents)")

// EventBackoff paces the reconnections of an event stream that broke:
// Initial, doubling up to Max; a stream that delivered an event starts
// the count afresh.
type EventBackoff struct{ Initial, Max time.Duration }

// DefaultEventBackoff is the kubelet's relist-like pace: a runtime that
// restarts is streamed again within a second, one that stays down is
// asked every 30 s.
var DefaultEventBackoff = EventBackoff{Initial: time.Second, Max: 30 * time.Second}

// WatchContainerEvents streams the runtime's container events (the CRI's
// GetContainerEvents, as the kubelet's evented PLEG reads them) to onEvent
// until ctx ends, reconnecting after a broken stream. It returns nil when
// ctx ends, ErrNoContainerEvents when the runtime lacks the call.
func (s *Service) WatchContainerEvents(ctx context.Context, clk clock.Clock, b EventBackoff, onEvent func(*runtimeapi.ContainerEventResponse)) error {
	delay := b.Initial
	for ctx.Err() == nil {
		delivered, err := s.followContainerEvents(ctx, onEvent)
		if status.Code(err) == codes.Unimplemented {
			return ErrNoContainerEvents
		}
		if ctx.Err() != nil {
			return nil
		}
		if delivered {
			delay = b.Initial
		}
		select {
		case <-ctx.Done():
		case <-clk.After(delay):
		}
		delay = min(2*delay, b.Max)
	}
	return nil
}

// followContainerEvents reads one stream until it breaks, saying whether it
// delivered any event.
func (s *Service) followContainerEvents(ctx context.Context, onEvent func(*runtimeapi.ContainerEventResponse)) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return false, err
	}
	delivered := false
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return delivered, fmt.Errorf("container event stream closed by the runtime")
		}
		if err != nil {
			return delivered, err
		}
		delivered = true
		onEvent(ev)
	}
}

// ExitOf is the exit a STOPPED container event carries for its container,
// and whether it carries one.
func ExitOf(ev *runtimeapi.ContainerEventResponse) (Exit, bool) {
	if ev.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
		return Exit{}, false
	}
	for _, st := range ev.GetContainersStatuses() {
		if st.GetId() == ev.GetContainerId() && st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return Exit{Code: st.GetExitCode(), At: time.Unix(0, st.GetFinishedAt()), OOM: st.GetReason() == "OOMKilled"}, true
		}
	}
	return Exit{}, false
}
