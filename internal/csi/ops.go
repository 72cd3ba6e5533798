package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// StageRequest is what NodeStageVolume needs of a PersistentVolume's CSI
// source. Secrets are the resolved NodeStageSecretRef.
type StageRequest struct {
	Driver, VolumeHandle string
	AccessMode           v1.PersistentVolumeAccessMode // the PV's first; ReadWriteOnce if ""
	FSType               string
	MountOptions         []string
	VolumeAttributes     map[string]string
	PublishContext       map[string]string
	Secrets              map[string]string
	FSGroup              *int64 // the pod's fsGroup, for VOLUME_MOUNT_GROUP drivers
	// SELinuxMountContext is the pod's SELinux label when the volume is
	// mounted with it (the CSIDriver has seLinuxMount and the access mode
	// allows it: the caller's decision); "" otherwise.
	SELinuxMountContext string
}

// StageResult says what Stage did.
type StageResult struct {
	// StagingPath is the staging target; "" when the driver does not stage
	// (no STAGE_UNSTAGE_VOLUME), and then Publish is called without one.
	StagingPath string
	// Called: NodeStageVolume was called (false: not needed or already
	// staged and mounted).
	Called bool
}

// Stage stages a volume for the node (the kubelet's MountDevice) when its
// driver has STAGE_UNSTAGE_VOLUME.
func (m *Manager) Stage(ctx context.Context, r StageRequest) (StageResult, error) {
	const op = "NodeStageVolume"
	if err := needNames(r.Driver, r.VolumeHandle); err != nil {
		return StageResult{}, &OpError{Op: op, Driver: r.Driver, Volume: r.VolumeHandle, Err: err}
	}
	e, err := m.lookup(r.Driver)
	if err != nil {
		return StageResult{}, &OpError{Op: op, Driver: r.Driver, Volume: r.VolumeHandle, Err: err}
	}
	caps := e.info.Capabilities
	if !caps.StageUnstage {
		// Unlike the kubelet, which makes an empty globalmount dir for
		// such drivers, nothing is made where nothing is needed.
		return StageResult{}, nil
	}
	dir := StagingDir(m.root, r.Driver, r.VolumeHandle)
	res := StageResult{StagingPath: StagingPath(m.root, r.Driver, r.VolumeHandle)}
	fail := func(err error) (StageResult, error) {
		return StageResult{}, &OpError{Op: op, Driver: r.Driver, Volume: r.VolumeHandle, Target: res.StagingPath, Err: err}
	}
	t, err := readTarget(m.mounts, dir, globalMountDir)
	if err != nil {
		return fail(err)
	}
	s, err := planSetUp(t, r.Driver, r.VolumeHandle)
	if err != nil || s == stepNone {
		if err != nil {
			return fail(err)
		}
		return res, nil
	}
	data := VolData{VolumeHandle: r.VolumeHandle, DriverName: r.Driver, SELinuxMountContext: r.SELinuxMountContext}
	if err := writeVolData(dir, data, globalMountDir); err != nil {
		return fail(fmt.Errorf("recording the volume: %w", err))
	}
	var mountGroup string
	if caps.VolumeMountGroup && r.FSGroup != nil {
		mountGroup = fmt.Sprint(*r.FSGroup)
	}
	req := &csipb.NodeStageVolumeRequest{
		VolumeId:          r.VolumeHandle,
		PublishContext:    maps.Clone(r.PublishContext),
		StagingTargetPath: res.StagingPath,
		VolumeCapability:  volumeCapability(r.AccessMode, caps, r.FSType, withSELinux(r.MountOptions, r.SELinuxMountContext), mountGroup),
		Secrets:           maps.Clone(r.Secrets),
		VolumeContext:     maps.Clone(r.VolumeAttributes),
	}
	cctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	_, err = e.conn.NodeStageVolume(cctx, req)
	cancel()
	if err != nil {
		return StageResult{}, m.undo(op, r.Driver, r.VolumeHandle, dir, globalMountDir, res.StagingPath, err)
	}
	res.Called = true
	return res, nil
}

// undo reports a failed set-up call. A call that certainly failed leaves
// nothing behind (the kubelet's removeMountDir); one that may still be
// running keeps its record, so that it is torn down later, never leaked.
func (m *Manager) undo(op, driver, handle, dir, mountDir, tgt string, callErr error) error {
	oe := &OpError{Op: op, Driver: driver, Volume: handle, Target: tgt, Uncertain: !finalError(callErr), Err: callErr}
	if oe.Uncertain {
		return oe
	}
	if err := removeTarget(m.mounts, dir, mountDir); err != nil {
		oe.Err = fmt.Errorf("%w (and cleaning up: %v)", callErr, err)
	}
	return oe
}

func needNames(driver, handle string) error {
	if err := checkPathName("driver name", driver); err != nil {
		return err
	}
	if handle == "" {
		return errors.New("no volume handle")
	}
	return nil
}

// PublishRequest is what NodePublishVolume needs: the volume (a PV's CSI
// source, or a pod's inline CSI volume), the pod, and the CSIDriver's
// settings, which the caller reads from the API.
type PublishRequest struct {
	Driver, VolumeHandle string
	// VolumeName is the PV's name, or the pod's volume name for an inline
	// volume (Ephemeral); it names the publish dir.
	VolumeName string
	Ephemeral  bool
	Pod        PodInfo // UID required
	ReadOnly   bool
	// AccessModes are the PV's (the first is passed to the driver);
	// inline volumes are ReadWriteOnce.
	AccessModes      []v1.PersistentVolumeAccessMode
	FSType           string
	MountOptions     []string
	VolumeAttributes map[string]string
	PublishContext   map[string]string
	Secrets          map[string]string
	// PodInfoOnMount and FSGroupPolicy are the CSIDriver's ("" policy: no
	// CSIDriver object, the default).
	PodInfoOnMount      bool
	FSGroupPolicy       storagev1.FSGroupPolicy
	FSGroup             *int64
	SELinuxMountContext string // as in StageRequest
	// Republish calls NodePublishVolume even when the volume is published
	// already: the CSIDriver's requiresRepublish, for drivers that renew
	// what they publish (tokens, secrets) at each call.
	Republish bool
}

// PublishResult says what Publish did and what is left to the caller.
type PublishResult struct {
	TargetPath string
	// Called: NodePublishVolume was called (false: already published).
	Called bool
	// ApplyFSGroup: the caller must give the volume the pod's fsGroup
	// (the driver cannot: no VOLUME_MOUNT_GROUP), as the kubelet does.
	ApplyFSGroup bool
}

// Publish publishes a volume for a pod (the kubelet's SetUp). Stage must
// have been done first for drivers that stage.
func (m *Manager) Publish(ctx context.Context, r PublishRequest) (PublishResult, error) {
	const op = "NodePublishVolume"
	res := PublishResult{}
	fail := func(err error) (PublishResult, error) {
		return PublishResult{}, &OpError{Op: op, Driver: r.Driver, Volume: r.VolumeHandle, Target: res.TargetPath, Err: err}
	}
	if err := needNames(r.Driver, r.VolumeHandle); err != nil {
		return fail(err)
	}
	if err := checkPathName("pod UID", r.Pod.UID); err != nil {
		return fail(err)
	}
	if err := checkPathName("volume name", escapeQualifiedName(r.VolumeName)); err != nil {
		return fail(err)
	}
	uid := types.UID(r.Pod.UID)
	dir := PublishDir(m.root, uid, r.VolumeName)
	res.TargetPath = PublishPath(m.root, uid, r.VolumeName)
	t, err := readTarget(m.mounts, dir, publishMountDir)
	if err != nil {
		return fail(err)
	}
	s, err := planSetUp(t, r.Driver, r.VolumeHandle)
	if err != nil {
		return fail(err)
	}
	if s == stepNone && !r.Republish {
		return res, nil
	}
	e, err := m.lookup(r.Driver)
	if err != nil {
		return fail(err)
	}
	req, applyFSGroup := m.publishCall(r, e.info.Capabilities, res.TargetPath)
	if s == stepNone {
		return m.republish(ctx, e, req, res)
	}
	mode := storagev1.VolumeLifecyclePersistent
	if r.Ephemeral {
		mode = storagev1.VolumeLifecycleEphemeral
	}
	data := VolData{
		SpecVolID: r.VolumeName, VolumeHandle: r.VolumeHandle, DriverName: r.Driver, NodeName: m.nodeName,
		LifecycleMode: mode, AttachmentID: attachmentName(r.VolumeHandle, r.Driver, m.nodeName),
		SELinuxMountContext: r.SELinuxMountContext,
	}
	if err := writeVolData(dir, data, ""); err != nil {
		return fail(fmt.Errorf("recording the volume: %w", err))
	}
	cctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	_, err = e.conn.NodePublishVolume(cctx, req)
	cancel()
	if err != nil {
		return PublishResult{}, m.undo(op, r.Driver, r.VolumeHandle, dir, publishMountDir, res.TargetPath, err)
	}
	res.Called, res.ApplyFSGroup = true, applyFSGroup
	return res, nil
}

// republish calls NodePublishVolume on a volume published already. A
// failure leaves the volume as it was: published, its record kept.
func (m *Manager) republish(ctx context.Context, e *entry, req *csipb.NodePublishVolumeRequest, res PublishResult) (PublishResult, error) {
	cctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	_, err := e.conn.NodePublishVolume(cctx, req)
	cancel()
	if err != nil {
		return PublishResult{}, &OpError{Op: "NodePublishVolume", Driver: e.info.Name, Volume: req.VolumeId, Target: res.TargetPath,
			Uncertain: !finalError(err), Err: fmt.Errorf("republishing: %w", err)}
	}
	res.Called = true
	return res, nil
}

// publishCall builds NodePublishVolume's request, and says whether the
// caller must apply the fsGroup.
func (m *Manager) publishCall(r PublishRequest, caps Capabilities, targetPath string) (*csipb.NodePublishVolumeRequest, bool) {
	mountGroup, applyFSGroup := fsGroupPlan(fsGroupInput{
		FSGroup: r.FSGroup, Policy: r.FSGroupPolicy, DriverMountGroup: caps.VolumeMountGroup,
		ReadOnly: r.ReadOnly, FSType: r.FSType, Ephemeral: r.Ephemeral, AccessModes: r.AccessModes,
	})
	mode := v1.ReadWriteOnce
	if !r.Ephemeral && len(r.AccessModes) > 0 {
		mode = r.AccessModes[0]
	}
	req := &csipb.NodePublishVolumeRequest{
		VolumeId:         r.VolumeHandle,
		PublishContext:   maps.Clone(r.PublishContext),
		TargetPath:       targetPath,
		VolumeCapability: volumeCapability(mode, caps, r.FSType, withSELinux(r.MountOptions, r.SELinuxMountContext), mountGroup),
		Readonly:         r.ReadOnly,
		Secrets:          maps.Clone(r.Secrets),
		VolumeContext:    publishVolumeContext(r.VolumeAttributes, r.PodInfoOnMount, r.Pod, r.Ephemeral),
	}
	if caps.StageUnstage && !r.Ephemeral {
		req.StagingTargetPath = StagingPath(m.root, r.Driver, r.VolumeHandle)
	}
	return req, applyFSGroup
}

// withSELinux adds the SELinux context mount option, as the kubelet's
// AddSELinuxMountOption.
func withSELinux(opts []string, label string) []string {
	out := slices.Clone(opts)
	if label != "" {
		out = append(out, fmt.Sprintf("context=%q", label))
	}
	return out
}
