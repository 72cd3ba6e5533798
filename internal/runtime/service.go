package runtime

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Timeouts bound every CRI call, so a runtime that hangs can delay one pod's
// sync but never wedge berth. Long operations (pull, stop with a grace
// period) get their own budget.
const (
	DefaultCallTimeout = 2 * time.Minute // the kubelet's runtimeRequestTimeout
	ListTimeout        = 10 * time.Second
	PullTimeout        = 10 * time.Minute
	maxMessageSize     = 16 << 20
)

// Service is a CRI v1 client (runtime and image services on one connection).
type Service struct {
	conn        *grpc.ClientConn
	rs          runtimeapi.RuntimeServiceClient
	is          runtimeapi.ImageServiceClient
	callTimeout time.Duration
	pulls       pullSet
	exits       exits
}

// RecordExit tells the service that container id exited (the runtime's
// event), so that it reads as exited before the CRI catches up.
func (s *Service) RecordExit(id string, x Exit) { s.exits.record(id, x, time.Now()) }

// RecordOOM tells the service that container id was killed for memory.
func (s *Service) RecordOOM(id string) { s.exits.recordOOM(id, time.Now()) }

// DialOption configures Dial.
type DialOption func(*dialOptions)

type dialOptions struct {
	metrics *Metrics
}

// WithMetrics counts and times every CRI call of the connection in m.
func WithMetrics(m *Metrics) DialOption {
	return func(o *dialOptions) { o.metrics = m }
}

// Dial connects to a CRI endpoint such as unix:///run/containerd/containerd.sock
// and checks that it answers Version within the context's deadline.
func Dial(ctx context.Context, endpoint string, opts ...DialOption) (*Service, error) {
	var o dialOptions
	for _, opt := range opts {
		opt(&o)
	}
	grpcOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize)),
	}
	if o.metrics != nil {
		grpcOpts = append(grpcOpts, grpc.WithChainUnaryInterceptor(o.metrics.intercept))
	}
	conn, err := grpc.NewClient(endpoint, grpcOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to CRI endpoint %s: %w", endpoint, err)
	}
	s := &Service{
		conn:        conn,
		rs:          runtimeapi.NewRuntimeServiceClient(conn),
		is:          runtimeapi.NewImageServiceClient(conn),
		callTimeout: DefaultCallTimeout,
	}
	if _, err := s.Version(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("CRI endpoint %s does not answer: %w", endpoint, err)
	}
	return s, nil
}

// Close closes the connection.
func (s *Service) Close() error { return s.conn.Close() }

// Runtime and Images expose the raw clients for tools and tests that need a
// call berth does not wrap.
func (s *Service) Runtime() runtimeapi.RuntimeServiceClient { return s.rs }
func (s *Service) Images() runtimeapi.ImageServiceClient    { return s.is }

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// Version reports the runtime's name and version.
func (s *Service) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	return s.rs.Version(ctx, &runtimeapi.VersionRequest{})
}

// RuntimeConfig is the runtime's own configuration (its cgroup driver);
// a runtime older than the call answers codes.Unimplemented.
func (s *Service) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	return s.rs.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
}

// RunPodSandbox creates and starts a pod sandbox.
func (s *Service) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	resp, err := s.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", err
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox stops a sandbox and tears down its network.
func (s *Service) StopPodSandbox(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	_, err := s.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return err
}

// RemovePodSandbox removes a stopped sandbox.
func (s *Service) RemovePodSandbox(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	_, err := s.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return err
}

// PodSandboxStatus returns one sandbox's status.
func (s *Service) PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// ListPodSandboxes lists sandboxes matching the filter (nil: all).
func (s *Service) ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f})
	if err != nil {
		return nil, err
	}
	return resp.Items, nil
}

// ListContainers lists containers matching the filter (nil: all).
func (s *Service) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
	if err != nil {
		return nil, err
	}
	return s.exits.overlayList(resp.Containers, f), nil
}

// ContainerStatus returns one container's status.
func (s *Service) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return nil, err
	}
	s.exits.overlayStatus(resp.Status)
	return resp.Status, nil
}

// CreateContainer creates a container in a sandbox.
func (s *Service) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	resp, err := s.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox,
	})
	if err != nil {
		return "", err
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (s *Service) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	_, err := s.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	return err
}

// StopContainer stops a container, giving it gracePeriod before SIGKILL.
func (s *Service) StopContainer(ctx context.Context, id string, gracePeriod int64) error {
	// The runtime needs the grace period itself plus time to deliver SIGKILL.
	ctx, cancel := withTimeout(ctx, s.callTimeout+time.Duration(gracePeriod)*time.Second)
	defer cancel()
	_, err := s.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: gracePeriod})
	return err
}

// RemoveContainer removes a container.
func (s *Service) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	_, err := s.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return err
}

// ExecSync runs cmd in a container and waits for it, up to timeout.
func (s *Service) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error) {
	// The CRI timeout is in whole seconds. The call's deadline is the
	// kubelet's: the command's timeout plus the runtime request timeout, for
	// the runtime to kill the command and reap it. A caller that gave up
	// sooner would send its next probe while the runtime still works on this
	// one: on a loaded node the execs in flight would pile up without bound.
	secs := int64((timeout + time.Second - 1) / time.Second)
	ctx, cancel := withTimeout(ctx, s.callTimeout+timeout)
	defer cancel()
	resp, err := s.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: secs})
	if err != nil {
		return nil, nil, 0, err
	}
	return resp.Stdout, resp.Stderr, resp.ExitCode, nil
}

// UpdateContainerResources changes a running container's resources in
// place (in-place pod resize).
func (s *Service) UpdateContainerResources(ctx context.Context, id string, r *runtimeapi.LinuxContainerResources) error {
	ctx, cancel := withTimeout(ctx, s.callTimeout)
	defer cancel()
	_, err := s.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: r})
	return err
}
