package devicemanager

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The time limits of the calls berth makes to a plugin. A plugin that never
// answers costs a registration or an admission this long, never berth's
// progress elsewhere.
const (
	connectTimeout   = 10 * time.Second
	preferredTimeout = 10 * time.Second
	allocateTimeout  = 30 * time.Second
	preStartTimeout  = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
)

// endpoint is berth's connection to one registered plugin.
type endpoint struct {
	resource string
	socket   string
	opts     *pluginapi.DevicePluginOptions
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	// ctx ends when the endpoint is replaced or berth stops; it bounds the
	// ListAndWatch stream.
	ctx    context.Context
	cancel context.CancelFunc
}

// connect dials the plugin's socket and reads its options.
func connect(ctx, parent context.Context, resource, socket string) (*endpoint, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", socket, err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	callCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	opts, err := client.GetDevicePluginOptions(callCtx, &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("GetDevicePluginOptions on %s: %w", socket, err)
	}
	epCtx, epCancel := context.WithCancel(parent)
	return &endpoint{
		resource: resource, socket: socket, opts: opts,
		conn: conn, client: client, ctx: epCtx, cancel: epCancel,
	}, nil
}

// stop ends the endpoint's stream and closes its connection.
func (e *endpoint) stop() {
	e.cancel()
	e.conn.Close()
}

// preferred asks the plugin which size devices it prefers among available,
// mustInclude among them.
func (e *endpoint) preferred(ctx context.Context, available, mustInclude []string, size int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, preferredTimeout)
	defer cancel()
	resp, err := e.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs:   available,
			MustIncludeDeviceIDs: mustInclude,
			AllocationSize:       int32(size),
		}},
	})
	if err != nil {
		return nil, err
	}
	if n := len(resp.ContainerResponses); n != 1 {
		return nil, fmt.Errorf("%d container responses to 1 request", n)
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// allocate asks the plugin for devs on behalf of one container.
func (e *endpoint) allocate(ctx context.Context, devs []string) (*pluginapi.ContainerAllocateResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, allocateTimeout)
	defer cancel()
	resp, err := e.client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: devs}},
	})
	if err != nil {
		return nil, err
	}
	if n := len(resp.ContainerResponses); n != 1 {
		return nil, fmt.Errorf("the plugin answered %d container responses to 1 request", n)
	}
	if resp.ContainerResponses[0] == nil {
		return nil, fmt.Errorf("the plugin answered an empty container response")
	}
	return resp.ContainerResponses[0], nil
}

// preStart tells the plugin a container with devs is about to start, when
// the plugin asked for it at registration.
func (e *endpoint) preStart(ctx context.Context, devs []string) error {
	if !e.opts.GetPreStartRequired() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, preStartTimeout)
	defer cancel()
	_, err := e.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: devs})
	return err
}
