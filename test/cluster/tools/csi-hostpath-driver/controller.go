package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// defaultCapacity is a volume's size when CreateVolume asks for none. The
// size is recorded, not enforced: the volume is a directory on the state
// directory's file system.
const defaultCapacity = 1 << 30

// checkCapabilities refuses what the driver cannot serve: block access
// (it has directories, not devices) and a capability naming no access type.
func checkCapabilities(field string, caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Errorf(codes.InvalidArgument, "%s: required", field)
	}
	for i, c := range caps {
		if err := checkCapability(fmt.Sprintf("%s[%d]", field, i), c); err != nil {
			return err
		}
	}
	return nil
}

func checkCapability(field string, c *csi.VolumeCapability) error {
	switch {
	case c == nil:
		return status.Errorf(codes.InvalidArgument, "%s: required", field)
	case c.GetBlock() != nil:
		return status.Errorf(codes.InvalidArgument, "%s: block access is not supported, only mount", field)
	case c.GetMount() == nil:
		return status.Errorf(codes.InvalidArgument, "%s: no access type: mount is required", field)
	case c.GetAccessMode() == nil || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN:
		return status.Errorf(codes.InvalidArgument, "%s: access_mode: required", field)
	}
	return nil
}

// capacity is the size CreateVolume records for r: the required bytes, or
// the default within the limit.
func capacity(r *csi.CapacityRange) (int64, error) {
	req, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0 || limit < 0:
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range %d..%d: negative", req, limit)
	case limit > 0 && req > limit:
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range: required_bytes %d exceed limit_bytes %d", req, limit)
	case req > 0:
		return req, nil
	case limit > 0 && limit < defaultCapacity:
		return limit, nil
	}
	return defaultCapacity, nil
}

func (d *driver) CreateVolume(_ context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if r.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name: required")
	}
	if err := checkCapabilities("volume_capabilities", r.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if r.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume_content_source: not supported (no snapshots or clones)")
	}
	for k := range r.GetParameters() {
		// The provisioner's own (--extra-create-metadata: the claim's name
		// and namespace) are information only.
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			return nil, status.Errorf(codes.InvalidArgument, "parameters: %q: unknown (this driver takes none)", k)
		}
	}
	size, err := capacity(r.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	id := volumeID(r.GetName())
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, err := d.state.get(id); err == nil {
		// Asked again (the provisioner retries): the same answer, if what
		// is asked for now fits what was made.
		limit := r.GetCapacityRange().GetLimitBytes()
		if m.Name != r.GetName() || m.CapacityBytes < r.GetCapacityRange().GetRequiredBytes() || (limit > 0 && m.CapacityBytes > limit) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists as %s with %d bytes, which does not fit capacity_range %v",
				r.GetName(), id, m.CapacityBytes, r.GetCapacityRange())
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: m.CapacityBytes}}, nil
	} else if status.Code(err) != codes.NotFound {
		return nil, err
	}
	if err := d.state.create(id, volumeMeta{Name: r.GetName(), CapacityBytes: size}); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.InfoS("created volume", "name", r.GetName(), "id", id, "bytes", size, "path", d.state.path(id))
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: size}}, nil
}

func (d *driver) DeleteVolume(_ context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := checkID("volume_id", r.GetVolumeId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.state.remove(r.GetVolumeId()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.InfoS("deleted volume", "id", r.GetVolumeId())
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, r *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := checkID("volume_id", r.GetVolumeId()); err != nil {
		return nil, err
	}
	if len(r.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities: required")
	}
	if _, err := d.state.get(r.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkCapabilities("volume_capabilities", r.GetVolumeCapabilities()); err != nil {
		// Not confirmed, and the message says why.
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      r.GetVolumeContext(),
		VolumeCapabilities: r.GetVolumeCapabilities(),
		Parameters:         r.GetParameters(),
	}}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: rpcCaps(
		[]csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME},
		func(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
			return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
				Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
			}}
		})}, nil
}

// rpcCaps wraps each of types as a capability.
func rpcCaps[T, C any](types []T, wrap func(T) C) []C {
	var out []C
	for _, t := range types {
		out = append(out, wrap(t))
	}
	return out
}
