package runtime

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// eventsRuntime streams the events of its streams, one stream per call:
// each is sent, then the stream breaks (or, for the last, stays open).
type eventsRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu      sync.Mutex
	streams [][]*runtimeapi.ContainerEventResponse
	calls   int
}

func (e *eventsRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake"}, nil
}

func (e *eventsRuntime) GetContainerEvents(_ *runtimeapi.GetEventsRequest, srv runtimeapi.RuntimeService_GetContainerEventsServer) error {
	e.mu.Lock()
	n := e.calls
	e.calls++
	e.mu.Unlock()
	if n >= len(e.streams) {
		<-srv.Context().Done()
		return nil
	}
	for _, ev := range e.streams[n] {
		if err := srv.Send(ev); err != nil {
			return err
		}
	}
	return status.Error(codes.Unavailable, "runtime restarting")
}

func serveCRI(t *testing.T, rs runtimeapi.RuntimeServiceServer) *Service {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, "unix://"+sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func stopped(id string, code int32) *runtimeapi.ContainerEventResponse {
	return &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		ContainersStatuses: []*runtimeapi.ContainerStatus{
			{Id: "other", State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			{Id: id, State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: code, FinishedAt: 1e9, Reason: "OOMKilled"},
		},
	}
}

// TestWatchContainerEventsReconnects checks that every event of every
// stream is delivered, in order, across a stream the runtime broke.
func TestWatchContainerEventsReconnects(t *testing.T) {
	started := &runtimeapi.ContainerEventResponse{ContainerId: "a", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT}
	rs := &eventsRuntime{streams: [][]*runtimeapi.ContainerEventResponse{{started, stopped("a", 137)}, {stopped("b", 1)}}}
	s := serveCRI(t, rs)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 10)
	done := make(chan error)
	go func() {
		done <- s.WatchContainerEvents(ctx, clock.RealClock{}, EventBackoff{Initial: time.Millisecond, Max: 10 * time.Millisecond},
			func(ev *runtimeapi.ContainerEventResponse) {
				got <- ev.GetContainerId() + " " + ev.GetContainerEventType().String()
			})
	}()
	for _, want := range []string{"a CONTAINER_STARTED_EVENT", "a CONTAINER_STOPPED_EVENT", "b CONTAINER_STOPPED_EVENT"} {
		select {
		case g := <-got:
			if g != want {
				t.Errorf("event %q, want %q", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event %q", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchContainerEvents at ctx's end = %v, want nil", err)
	}
}

func TestWatchContainerEventsUnimplemented(t *testing.T) {
	s := serveCRI(t, versionOnly{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.WatchContainerEvents(ctx, clock.RealClock{}, DefaultEventBackoff, func(*runtimeapi.ContainerEventResponse) {})
	if !errors.Is(err, ErrNoContainerEvents) {
		t.Errorf("on a runtime without the call: %v, want ErrNoContainerEvents", err)
	}
}

func TestExitOf(t *testing.T) {
	if x, ok := ExitOf(stopped("a", 137)); !ok || x.Code != 137 || !x.OOM || !x.At.Equal(time.Unix(1, 0)) {
		t.Errorf("ExitOf(stopped a) = %+v, %v", x, ok)
	}
	if _, ok := ExitOf(&runtimeapi.ContainerEventResponse{ContainerId: "a", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT}); ok {
		t.Error("a started event carries an exit")
	}
	if _, ok := ExitOf(&runtimeapi.ContainerEventResponse{ContainerId: "a", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT}); ok {
		t.Error("a stopped event without the container's status carries an exit")
	}
}
