package deviceplugin

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// service answers the DevicePlugin RPCs; it is separate from Plugin so that
// the gRPC methods stay out of the API the tests use.
type service struct {
	pluginapi.UnimplementedDevicePluginServer
	p *Plugin
}

func (s *service) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return s.p.options(), nil
}

// ListAndWatch sends the device list, then the whole list again after every
// change. A slow reader misses intermediate lists, never the latest one.
func (s *service) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	s.p.record(func(c *Calls) { c.ListAndWatch++ })
	for {
		list, changed := s.p.deviceList()
		if err := stream.Send(list); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (s *service) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	s.p.record(func(c *Calls) { c.Allocate = append(c.Allocate, proto.CloneOf(req)) })
	s.p.mu.Lock()
	failMsg, short, devs := s.p.failAllocate, s.p.shortAllocate, s.p.devices
	s.p.mu.Unlock()
	if failMsg != "" {
		return nil, status.Error(codes.Unknown, failMsg)
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		if id, ok := unknownDevice(cr.GetDevicesIds(), devs); ok {
			return nil, status.Errorf(codes.InvalidArgument, "allocate: unknown device %q", id)
		}
		resp.ContainerResponses = append(resp.ContainerResponses,
			containerAllocation(cr.GetDevicesIds(), s.p.cfg.DeviceHostPath, s.p.cfg.Mounts))
	}
	if short && len(resp.ContainerResponses) > 0 {
		resp.ContainerResponses = resp.ContainerResponses[:len(resp.ContainerResponses)-1]
	}
	return resp, nil
}

// GetPreferredAllocation and PreStartContainer are recorded even when the
// plugin did not offer them, so that a test can catch an agent calling them
// anyway.
func (s *service) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	s.p.record(func(c *Calls) { c.Preferred = append(c.Preferred, proto.CloneOf(req)) })
	if !s.p.cfg.GetPreferredAllocationAvailable {
		return nil, status.Error(codes.Unimplemented, "GetPreferredAllocation is not offered by this plugin")
	}
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: preferredDevices(cr.GetAvailableDeviceIDs(), cr.GetMustIncludeDeviceIDs(), int(cr.GetAllocationSize())),
		})
	}
	return resp, nil
}

func (s *service) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	s.p.record(func(c *Calls) { c.PreStart = append(c.PreStart, proto.CloneOf(req)) })
	if !s.p.cfg.PreStartRequired {
		return nil, status.Error(codes.Unimplemented, "PreStartContainer is not required by this plugin")
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}
