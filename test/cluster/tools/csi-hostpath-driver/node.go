package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// ephemeralKey is set in the volume context of a pod's inline (ephemeral)
// volume: the kubelet publishes it without CreateVolume or staging.
const ephemeralKey = "csi.storage.k8s.io/ephemeral"

func checkPath(field, p string) error {
	if p == "" {
		return status.Errorf(codes.InvalidArgument, "%s: required", field)
	}
	if !filepath.IsAbs(p) {
		return status.Errorf(codes.InvalidArgument, "%s %q: not an absolute path", field, p)
	}
	return nil
}

func internal(err error) error { return status.Error(codes.Internal, err.Error()) }

func (d *driver) NodeStageVolume(_ context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging := r.GetVolumeId(), r.GetStagingTargetPath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkPath("staging_target_path", staging); err != nil {
		return nil, err
	}
	if err := checkCapability("volume_capability", r.GetVolumeCapability()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.state.get(id); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, internal(err)
	}
	if err := d.mountedHere(staging, d.state.path(id), false); err != nil || d.isMounted(staging) {
		return &csi.NodeStageVolumeResponse{}, err // staged already, or another volume is
	}
	if err := bindMount(d.state.path(id), staging, false); err != nil {
		return nil, internal(err)
	}
	klog.InfoS("staged", "volume", id, "at", staging)
	return &csi.NodeStageVolumeResponse{}, nil
}

// isMounted says whether anything is mounted at path (an error reading
// the mount table counts as no: mountedHere has reported it).
func (d *driver) isMounted(path string) bool {
	m, err := mountAt(path)
	return err == nil && m != nil
}

// mountedHere checks what is mounted at path, if anything: nil if nothing
// is, or src is with the read-only flag ro (a repeated call, which
// succeeds); AlreadyExists if something else is.
func (d *driver) mountedHere(path, src string, ro bool) error {
	m, err := mountAt(path)
	if err != nil {
		return internal(err)
	}
	if m == nil {
		return nil
	}
	same, err := sameFile(path, src)
	if err != nil {
		return internal(err)
	}
	if !same || m.readOnly != ro {
		return status.Errorf(codes.AlreadyExists, "%s: mounted already, not as %s read-only=%v", path, src, ro)
	}
	return nil
}

func (d *driver) NodeUnstageVolume(_ context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := checkID("volume_id", r.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkPath("staging_target_path", r.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Whatever is mounted there goes, even if the volume has: the node must
	// always be able to clean up. The directory is the node's.
	if err := unmountAll(r.GetStagingTargetPath()); err != nil {
		return nil, internal(err)
	}
	klog.InfoS("unstaged", "volume", r.GetVolumeId(), "from", r.GetStagingTargetPath())
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target := r.GetVolumeId(), r.GetTargetPath()
	ephemeral := r.GetVolumeContext()[ephemeralKey] == "true"
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkPath("target_path", target); err != nil {
		return nil, err
	}
	if !ephemeral {
		if err := checkPath("staging_target_path", r.GetStagingTargetPath()); err != nil {
			return nil, err
		}
	}
	if err := checkCapability("volume_capability", r.GetVolumeCapability()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	src, created, err := d.publishSource(id, r.GetStagingTargetPath(), ephemeral)
	if err != nil {
		return nil, err
	}
	if err := d.publish(src, target, r.GetReadonly()); err != nil {
		if created {
			if rerr := d.state.remove(id); rerr != nil {
				klog.ErrorS(rerr, "remove the ephemeral volume of a failed publish", "volume", id)
			}
		}
		return nil, err
	}
	klog.InfoS("published", "volume", id, "at", target, "readOnly", r.GetReadonly(), "ephemeral", ephemeral)
	return &csi.NodePublishVolumeResponse{}, nil
}

// publishSource is what NodePublishVolume bind-mounts: the staging path
// of a staged volume, or an inline ephemeral volume's own directory, made
// now unless a repeated call made it (created says which).
func (d *driver) publishSource(id, staging string, ephemeral bool) (src string, created bool, err error) {
	if ephemeral {
		if _, err := d.state.get(id); status.Code(err) == codes.NotFound {
			if err := d.state.create(id, volumeMeta{Name: id, CapacityBytes: defaultCapacity, Ephemeral: true}); err != nil {
				return "", false, internal(err)
			}
			return d.state.path(id), true, nil
		} else if err != nil {
			return "", false, err
		}
		return d.state.path(id), false, nil
	}
	if _, err := d.state.get(id); err != nil {
		return "", false, err
	}
	same, err := sameFile(staging, d.state.path(id))
	if errors.Is(err, unix.ENOENT) || (err == nil && (!same || !d.isMounted(staging))) {
		return "", false, status.Errorf(codes.FailedPrecondition, "staging_target_path %q: volume %q is not staged there", staging, id)
	} else if err != nil {
		return "", false, internal(err)
	}
	return staging, false, nil
}

// publish bind-mounts src at target, making target if need be; it
// succeeds at once if a repeated call did that already.
func (d *driver) publish(src, target string, ro bool) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return internal(err)
	}
	if err := d.mountedHere(target, src, ro); err != nil || d.isMounted(target) {
		return err
	}
	if err := bindMount(src, target, ro); err != nil {
		return internal(err)
	}
	return nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := r.GetVolumeId(), r.GetTargetPath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkPath("target_path", target); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmountAll(target); err != nil {
		return nil, internal(err)
	}
	// The target is the driver's to remove (CSI: the plugin deletes what
	// it created there). Remove, not RemoveAll: files in it now are no
	// volume's, and are not the driver's to delete.
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, internal(err)
	}
	if m, err := d.state.get(id); err == nil && m.Ephemeral {
		if err := d.state.remove(id); err != nil {
			return nil, internal(err)
		}
		klog.InfoS("deleted ephemeral volume", "volume", id)
	}
	klog.InfoS("unpublished", "volume", id, "from", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (d *driver) NodeGetVolumeStats(_ context.Context, r *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, path := r.GetVolumeId(), r.GetVolumePath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkPath("volume_path", path); err != nil {
		return nil, err
	}
	if _, err := d.state.get(id); err != nil {
		return nil, err
	}
	same, err := sameFile(path, d.state.path(id))
	if errors.Is(err, unix.ENOENT) || (err == nil && !same) {
		return nil, status.Errorf(codes.NotFound, "volume_path %q: volume %q is not there", path, id)
	} else if err != nil {
		return nil, internal(err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return nil, internal(err)
	}
	bsize := int64(fs.Bsize)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{
			Unit:      csi.VolumeUsage_BYTES,
			Total:     int64(fs.Blocks) * bsize,
			Available: int64(fs.Bavail) * bsize,
			Used:      int64(fs.Blocks-fs.Bfree) * bsize,
		},
		{
			Unit:      csi.VolumeUsage_INODES,
			Total:     int64(fs.Files),
			Available: int64(fs.Ffree),
			Used:      int64(fs.Files - fs.Ffree),
		},
	}}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: rpcCaps(
		[]csi.NodeServiceCapability_RPC_Type{
			csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
			csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		},
		func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
			return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
				Rpc: &csi.NodeServiceCapability_RPC{Type: t},
			}}
		})}, nil
}

// NodeGetInfo reports no topology: volumes are on the node that made
// them, and the tests run one node per driver.
func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}
