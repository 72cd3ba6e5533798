package csi

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// Capabilities are the node service capabilities berth acts on.
type Capabilities struct {
	StageUnstage          bool
	VolumeStats           bool
	ExpandVolume          bool
	VolumeCondition       bool
	SingleNodeMultiWriter bool
	VolumeMountGroup      bool
}

func capabilitiesFrom(caps []*csipb.NodeServiceCapability) Capabilities {
	var c Capabilities
	for _, cap := range caps {
		switch cap.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			c.StageUnstage = true
		case csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			c.VolumeStats = true
		case csipb.NodeServiceCapability_RPC_EXPAND_VOLUME:
			c.ExpandVolume = true
		case csipb.NodeServiceCapability_RPC_VOLUME_CONDITION:
			c.VolumeCondition = true
		case csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			c.SingleNodeMultiWriter = true
		case csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			c.VolumeMountGroup = true
		}
	}
	return c
}

// validateVersions picks the highest CSI version a driver offers, as the
// kubelet: only 1.x is spoken (0.x was dropped in 1.17, 2.x need not be
// compatible). A driver of the same name already registered keeps its place
// unless the newcomer offers a higher version. registered is nil when no
// driver of that name is registered.
func validateVersions(name string, versions []string, registered *version.Version) (*version.Version, error) {
	if len(versions) == 0 {
		return nil, fmt.Errorf("CSI driver %q offers no versions; berth speaks CSI 1.x", name)
	}
	v, err := version.HighestSupportedVersion(versions)
	if err != nil {
		return nil, fmt.Errorf("CSI driver %q offers versions [%s], none of which berth speaks (CSI 1.x): %w",
			name, strings.Join(versions, ", "), err)
	}
	if registered != nil && !registered.LessThan(v) {
		return nil, fmt.Errorf("CSI driver %q offering version %s: a driver of that name is already registered with version %s",
			name, v, registered)
	}
	return v, nil
}

// csiAccessMode maps a Kubernetes access mode to CSI's as the kubelet does;
// drivers with SINGLE_NODE_MULTI_WRITER get the finer single-node modes.
func csiAccessMode(m v1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) csipb.VolumeCapability_AccessMode_Mode {
	switch m {
	case v1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// volumeCapability is what NodeStageVolume and NodePublishVolume are told
// of the volume's use. fsType "block" asks for a raw block device, as in
// the kubelet.
func volumeCapability(mode v1.PersistentVolumeAccessMode, caps Capabilities, fsType string, mountOptions []string, mountGroup string) *csipb.VolumeCapability {
	if mode == "" {
		mode = v1.ReadWriteOnce
	}
	vc := &csipb.VolumeCapability{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csiAccessMode(mode, caps.SingleNodeMultiWriter)},
	}
	if fsType == "block" {
		vc.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
		return vc
	}
	vc.AccessType = &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
		FsType: fsType, MountFlags: slices.Clone(mountOptions), VolumeMountGroup: mountGroup,
	}}
	return vc
}

// PodInfo is what the kubelet tells a driver of the pod when its CSIDriver
// has podInfoOnMount.
type PodInfo struct {
	Name, Namespace, UID, ServiceAccountName string
}

// The volume context keys of podInfoOnMount.
const (
	ctxPodName            = "csi.storage.k8s.io/pod.name"
	ctxPodNamespace       = "csi.storage.k8s.io/pod.namespace"
	ctxPodUID             = "csi.storage.k8s.io/pod.uid"
	ctxServiceAccountName = "csi.storage.k8s.io/serviceAccount.name"
	ctxEphemeral          = "csi.storage.k8s.io/ephemeral"
)

// publishVolumeContext is the volume context of NodePublishVolume: the
// volume's attributes, and the pod's keys on top of them when the driver
// asked for them (podInfoOnMount), as the kubelet merges them.
func publishVolumeContext(attrs map[string]string, podInfoOnMount bool, pod PodInfo, ephemeral bool) map[string]string {
	out := maps.Clone(attrs)
	if !podInfoOnMount {
		return out
	}
	if out == nil {
		out = map[string]string{}
	}
	out[ctxPodName] = pod.Name
	out[ctxPodNamespace] = pod.Namespace
	out[ctxPodUID] = pod.UID
	out[ctxServiceAccountName] = pod.ServiceAccountName
	out[ctxEphemeral] = strconv.FormatBool(ephemeral)
	return out
}

// fsGroupInput is what decides who applies a pod's fsGroup to a volume.
type fsGroupInput struct {
	FSGroup *int64
	// Policy is the CSIDriver's fsGroupPolicy; "" (no CSIDriver object)
	// means the default, ReadWriteOnceWithFSType.
	Policy           storagev1.FSGroupPolicy
	DriverMountGroup bool // VOLUME_MOUNT_GROUP
	ReadOnly         bool
	FSType           string
	Ephemeral        bool
	AccessModes      []v1.PersistentVolumeAccessMode
}

// fsGroupPlan says, as the kubelet's csiMountMgr: the driver applies the
// fsGroup (mountGroup, passed as VolumeMountGroup) when it has
// VOLUME_MOUNT_GROUP; otherwise the caller must change the ownership
// itself (callerApplies) when the policy asks for it.
func fsGroupPlan(in fsGroupInput) (mountGroup string, callerApplies bool) {
	if in.FSGroup == nil {
		return "", false
	}
	if in.DriverMountGroup {
		return strconv.FormatInt(*in.FSGroup, 10), false
	}
	if in.Policy == storagev1.NoneFSGroupPolicy || in.ReadOnly {
		return "", false
	}
	if in.Policy == storagev1.FileFSGroupPolicy {
		return "", true
	}
	if in.FSType == "" {
		return "", false
	}
	if in.Ephemeral {
		// Inline volumes are always published ReadWriteOnce.
		return "", true
	}
	return "", slices.Contains(in.AccessModes, v1.ReadWriteOnce) || slices.Contains(in.AccessModes, v1.ReadWriteOncePod)
}

// target is what is on disk at a staging or publish dir.
type target struct {
	// Data is the dir's vol_data.json; nil if there is none. DataErr says
	// why it could not be read (corrupt), and then Data is nil.
	Data    *VolData
	DataErr error
	// DirExists: the dir holding vol_data.json exists. Mounted: its target
	// (globalmount, mount) is a mount point.
	DirExists bool
	Mounted   bool
}

// step is what an operation does.
type step int

const (
	// stepNone: nothing to do (already done, or nothing there).
	stepNone step = iota
	// stepCall: call the driver, then record (or clean up) on success.
	stepCall
	// stepCleanup: no driver call; remove berth's files and empty dirs.
	stepCleanup
)

func (s step) String() string {
	return [...]string{"none", "call", "cleanup"}[s]
}

// same says whether d records the volume (driver, handle).
func same(d *VolData, driver, handle string) bool {
	return d != nil && d.DriverName == driver && d.VolumeHandle == handle
}

// planSetUp decides Stage and Publish: a target that is mounted and records
// this volume is done; one that is mounted for another volume (or whose
// record is unreadable) is not touched; anything else is (re)done, since
// the drivers' NodeStage/NodePublish are idempotent.
func planSetUp(t target, driver, handle string) (step, error) {
	switch {
	case !t.Mounted:
		return stepCall, nil
	case t.DataErr != nil:
		return stepNone, fmt.Errorf("target is mounted but its record cannot be read: %w", t.DataErr)
	case same(t.Data, driver, handle):
		return stepNone, nil
	case t.Data == nil:
		return stepNone, errors.New("target is mounted but has no vol_data.json: refusing to mount over it")
	}
	return stepNone, fmt.Errorf("target is mounted for volume %q of driver %q", t.Data.VolumeHandle, t.Data.DriverName)
}

// planTearDown decides Unpublish and Unstage: a volume with a record is
// handed to its driver (which must unmount, idempotently); nothing at all is
// nothing to do; leftovers without a mount are removed. A mount without a
// readable record is an error: berth cannot know whose it is. withDriver is
// false for Unstage of a driver without STAGE_UNSTAGE, which has nothing to
// call.
func planTearDown(t target, withDriver bool) (step, error) {
	switch {
	case t.Data != nil && withDriver:
		return stepCall, nil
	case t.Mounted && t.DataErr != nil:
		return stepNone, fmt.Errorf("target is mounted but its record cannot be read: %w", t.DataErr)
	case t.Mounted && t.Data == nil:
		return stepNone, errors.New("target is mounted but has no vol_data.json: cannot tell which driver to ask")
	case t.Mounted:
		return stepNone, errors.New("target is mounted but its driver has no NodeUnstageVolume to unmount it")
	case t.DirExists:
		return stepCleanup, nil
	}
	return stepNone, nil
}

// finalError says whether a failed call certainly did nothing (or is
// over), as the kubelet's isFinalError: timeouts, cancellations and
// "busy" answers may leave the operation running in the driver, and a
// non-gRPC error comes from before the call, unknown.
func finalError(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return false
	}
	return true
}
