package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/types"
)

// TearDownResult says what Unpublish or Unstage did.
type TearDownResult struct {
	// Called: the driver was asked to unmount; false when there was
	// nothing (or only berth's leftovers) to remove.
	Called bool
}

// Unpublish unpublishes a pod's volume (the kubelet's TearDown), learning
// its driver and handle from the publish dir's vol_data.json. A volume that
// is not there is no error.
func (m *Manager) Unpublish(ctx context.Context, podUID types.UID, volumeName string) (TearDownResult, error) {
	const op = "NodeUnpublishVolume"
	dir := PublishDir(m.root, podUID, volumeName)
	tgt := PublishPath(m.root, podUID, volumeName)
	if err := checkPathName("pod UID", string(podUID)); err != nil {
		return TearDownResult{}, &OpError{Op: op, Err: err}
	}
	if err := checkPathName("volume name", escapeQualifiedName(volumeName)); err != nil {
		return TearDownResult{}, &OpError{Op: op, Err: err}
	}
	t, err := readTarget(m.mounts, dir, publishMountDir)
	var driver, handle string
	if t.Data != nil {
		driver, handle = t.Data.DriverName, t.Data.VolumeHandle
	}
	fail := func(err error) (TearDownResult, error) {
		return TearDownResult{}, &OpError{Op: op, Driver: driver, Volume: handle, Target: tgt, Err: err}
	}
	if err != nil {
		return fail(err)
	}
	s, err := planTearDown(t, true)
	if err != nil {
		return fail(err)
	}
	return m.tearDown(ctx, op, s, driver, handle, dir, publishMountDir, tgt, func(ctx context.Context, c nodeConn) error {
		_, err := c.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: handle, TargetPath: tgt})
		return err
	})
}

// Unstage unstages a volume from the node (the kubelet's UnmountDevice). A
// volume that is not staged is no error.
func (m *Manager) Unstage(ctx context.Context, driver, volumeHandle string) (TearDownResult, error) {
	const op = "NodeUnstageVolume"
	dir := StagingDir(m.root, driver, volumeHandle)
	tgt := StagingPath(m.root, driver, volumeHandle)
	fail := func(err error) (TearDownResult, error) {
		return TearDownResult{}, &OpError{Op: op, Driver: driver, Volume: volumeHandle, Target: tgt, Err: err}
	}
	if err := needNames(driver, volumeHandle); err != nil {
		return fail(err)
	}
	t, err := readTarget(m.mounts, dir, globalMountDir)
	if err != nil {
		return fail(err)
	}
	if t.Data != nil && !same(t.Data, driver, volumeHandle) {
		return fail(fmt.Errorf("the staging dir records volume %q of driver %q", t.Data.VolumeHandle, t.Data.DriverName))
	}
	withDriver := false
	if t.Data != nil {
		e, err := m.lookup(driver)
		if err != nil {
			return fail(err)
		}
		withDriver = e.info.Capabilities.StageUnstage
	}
	s, err := planTearDown(t, withDriver)
	if err != nil {
		return fail(err)
	}
	return m.tearDown(ctx, op, s, driver, volumeHandle, dir, globalMountDir, tgt, func(ctx context.Context, c nodeConn) error {
		_, err := c.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: volumeHandle, StagingTargetPath: tgt})
		return err
	})
}

// tearDown carries out a teardown step: the call (within the call timeout),
// then the removal of berth's files. After a failed call everything stays,
// so that the next try (or a restart) finds the volume again.
func (m *Manager) tearDown(ctx context.Context, op string, s step, driver, handle, dir, mountDir, tgt string,
	call func(context.Context, nodeConn) error) (TearDownResult, error) {
	oe := func(err error) error {
		return &OpError{Op: op, Driver: driver, Volume: handle, Target: tgt, Err: err}
	}
	var res TearDownResult
	switch s {
	case stepNone:
		return res, nil
	case stepCall:
		e, err := m.lookup(driver)
		if err != nil {
			return res, oe(err)
		}
		cctx, cancel := context.WithTimeout(ctx, m.callTimeout)
		err = call(cctx, e.conn)
		cancel()
		if err != nil {
			return res, &OpError{Op: op, Driver: driver, Volume: handle, Target: tgt, Uncertain: !finalError(err), Err: err}
		}
		res.Called = true
	}
	if err := removeTarget(m.mounts, dir, mountDir); err != nil {
		return res, oe(fmt.Errorf("after the driver's answer: %w", err))
	}
	return res, nil
}

// VolumeStats are a published volume's usage, for /stats/summary.
type VolumeStats struct {
	CapacityBytes, UsedBytes, AvailableBytes int64
	Inodes, InodesUsed, InodesFree           int64
	// Abnormal and Message are the volume condition, where the driver
	// reports one (VOLUME_CONDITION).
	Abnormal *bool
	Message  string
}

// ErrStatsNotSupported is wrapped by Stats' error for a driver without
// GET_VOLUME_STATS: the kubelet reports no stats for such volumes.
var ErrStatsNotSupported = errors.New("the driver has no NodeGetVolumeStats (GET_VOLUME_STATS)")

// Stats asks the driver for a published volume's usage.
func (m *Manager) Stats(ctx context.Context, podUID types.UID, volumeName string) (VolumeStats, error) {
	const op = "NodeGetVolumeStats"
	dir := PublishDir(m.root, podUID, volumeName)
	tgt := PublishPath(m.root, podUID, volumeName)
	var d VolData
	err := errors.Join(checkPathName("pod UID", string(podUID)), checkPathName("volume name", escapeQualifiedName(volumeName)))
	if err == nil {
		d, err = readVolData(filepath.Join(dir, volDataFileName))
	}
	oe := func(err error) (VolumeStats, error) {
		return VolumeStats{}, &OpError{Op: op, Driver: d.DriverName, Volume: d.VolumeHandle, Target: tgt, Err: err}
	}
	if err != nil {
		return oe(fmt.Errorf("volume %q of pod %s is not published: %w", volumeName, podUID, err))
	}
	e, err := m.lookup(d.DriverName)
	if err != nil {
		return oe(err)
	}
	if !e.info.Capabilities.VolumeStats {
		return oe(ErrStatsNotSupported)
	}
	cctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	resp, err := e.conn.NodeGetVolumeStats(cctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: d.VolumeHandle, VolumePath: tgt})
	cancel()
	if err != nil {
		return oe(err)
	}
	st, err := statsFrom(resp, e.info.Capabilities.VolumeCondition)
	if err != nil {
		return oe(err)
	}
	return st, nil
}

// statsFrom reads NodeGetVolumeStats' answer as the kubelet: bytes and
// inodes by unit, unknown units ignored, no usage at all an error unless
// the driver reports a volume condition instead.
func statsFrom(resp *csipb.NodeGetVolumeStatsResponse, condition bool) (VolumeStats, error) {
	var st VolumeStats
	if condition && resp.GetVolumeCondition() != nil {
		abnormal := resp.GetVolumeCondition().GetAbnormal()
		st.Abnormal, st.Message = &abnormal, resp.GetVolumeCondition().GetMessage()
	}
	if len(resp.GetUsage()) == 0 && st.Abnormal == nil {
		return VolumeStats{}, errors.New("the driver answered no usage")
	}
	for _, u := range resp.GetUsage() {
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			st.CapacityBytes, st.UsedBytes, st.AvailableBytes = u.GetTotal(), u.GetUsed(), u.GetAvailable()
		case csipb.VolumeUsage_INODES:
			st.Inodes, st.InodesUsed, st.InodesFree = u.GetTotal(), u.GetUsed(), u.GetAvailable()
		}
	}
	return st, nil
}
