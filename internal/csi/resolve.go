package csi

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Source is what a pod volume resolves to: the CSI volume to stage and
// publish, read from a bound PersistentVolume or from the pod's inline csi
// volume.
type Source struct {
	Driver, VolumeHandle string
	// VolumeName names the publish dir: the PV's name, or the pod's volume
	// name for an inline (Ephemeral) volume.
	VolumeName string
	Ephemeral  bool
	// ReadOnly is the PVC reference's, the PV's CSI source's or the inline
	// volume's, as the kubelet's getReadOnlyFromSpec.
	ReadOnly         bool
	FSType           string
	MountOptions     []string
	AccessModes      []v1.PersistentVolumeAccessMode
	VolumeAttributes map[string]string
	// StageSecret and PublishSecret are the secrets to pass, by reference;
	// nil: none.
	StageSecret, PublishSecret *v1.SecretReference
}

// ClaimOf says which PVC a pod volume uses: a persistentVolumeClaim's, or
// for a generic ephemeral volume the one the ephemeral volume controller
// creates, <pod name>-<volume name>. ok is false for other volumes.
func ClaimOf(pod *v1.Pod, vol *v1.Volume) (claim string, ephemeral, readOnly, ok bool) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName, false, vol.PersistentVolumeClaim.ReadOnly, true
	case vol.Ephemeral != nil:
		return pod.Name + "-" + vol.Name, true, false, true
	}
	return "", false, false, false
}

// Handled says whether a pod volume is one this package sets up.
func Handled(vol *v1.Volume) bool {
	return vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil || vol.CSI != nil
}

// CheckClaim tells the bound PV of a PVC, with the kubelet's errors
// (getPVCExtractPV) for one that is being deleted or not bound yet.
func CheckClaim(pvc *v1.PersistentVolumeClaim) (string, error) {
	if pvc.DeletionTimestamp != nil && !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
		return "", errors.New("PVC is being deleted")
	}
	if pvc.Status.Phase != v1.ClaimBound {
		return "", errors.New("PVC is not bound")
	}
	if pvc.Spec.VolumeName == "" {
		return "", errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	return pvc.Spec.VolumeName, nil
}

// CheckEphemeralOwner refuses a generic ephemeral volume's PVC that the pod
// does not own (a PVC of that name made by someone else), with the
// kubelet's message (ephemeral.VolumeIsForPod).
func CheckEphemeralOwner(pod *v1.Pod, pvc *v1.PersistentVolumeClaim) error {
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.UID != pod.UID {
		return fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name)
	}
	return nil
}

// FromPV reads a bound PV's CSI source. The PV must be bound to the claim
// (its claimRef's UID), as the kubelet's getPVSpec checks; a PV of another
// source, or a raw block PV, is refused with the reason: berth mounts only
// CSI file system volumes.
func FromPV(pv *v1.PersistentVolume, claimUID string, claimReadOnly bool) (Source, error) {
	if pv.Spec.ClaimRef == nil {
		return Source{}, fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", pv.Name)
	}
	if string(pv.Spec.ClaimRef.UID) != claimUID {
		return Source{}, fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s",
			pv.Name, pv.Spec.ClaimRef.UID, claimUID)
	}
	c := pv.Spec.CSI
	if c == nil {
		return Source{}, fmt.Errorf("PV %s: only CSI persistent volumes are supported by berth (spec.csi is not set)", pv.Name)
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return Source{}, fmt.Errorf("PV %s: volumeMode Block is not supported by berth (only Filesystem)", pv.Name)
	}
	if c.Driver == "" || c.VolumeHandle == "" {
		return Source{}, fmt.Errorf("PV %s: spec.csi needs a driver and a volumeHandle", pv.Name)
	}
	return Source{
		Driver: c.Driver, VolumeHandle: c.VolumeHandle, VolumeName: pv.Name,
		ReadOnly: claimReadOnly || c.ReadOnly, FSType: c.FSType,
		MountOptions: slices.Clone(pv.Spec.MountOptions), AccessModes: slices.Clone(pv.Spec.AccessModes),
		VolumeAttributes: c.VolumeAttributes,
		StageSecret:      c.NodeStageSecretRef, PublishSecret: c.NodePublishSecretRef,
	}, nil
}

// FromInline reads a pod's inline csi volume: an ephemeral CSI volume,
// whose handle the kubelet makes from the pod and the volume, published
// without staging, its secret in the pod's namespace.
func FromInline(pod *v1.Pod, vol *v1.Volume) (Source, error) {
	c := vol.CSI
	if c == nil || c.Driver == "" {
		return Source{}, errors.New("csi volume with no driver")
	}
	s := Source{
		Driver: c.Driver, VolumeHandle: EphemeralVolumeHandle(pod.UID, vol.Name), VolumeName: vol.Name,
		Ephemeral: true, ReadOnly: c.ReadOnly != nil && *c.ReadOnly,
		AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		VolumeAttributes: c.VolumeAttributes,
	}
	if c.FSType != nil {
		s.FSType = *c.FSType
	}
	if c.NodePublishSecretRef != nil {
		s.PublishSecret = &v1.SecretReference{Name: c.NodePublishSecretRef.Name, Namespace: pod.Namespace}
	}
	return s, nil
}

// Policy is what a CSIDriver object says of its driver's volumes, with the
// kubelet's defaults when there is none.
type Policy struct {
	AttachRequired, PodInfoOnMount, SELinuxMount, RequiresRepublish bool
	FSGroupPolicy                                                   storagev1.FSGroupPolicy
	Modes                                                           []storagev1.VolumeLifecycleMode
	// TokenRequests are the service account tokens to hand the driver at
	// publish, in the volume context or, TokenInSecrets, in the secrets.
	TokenRequests  []storagev1.TokenRequest
	TokenInSecrets bool
	// Found: there is a CSIDriver object.
	Found bool
}

// PolicyOf reads a CSIDriver object; nil (none) is the kubelet's default:
// attach required, persistent volumes only, the default fsGroup policy.
func PolicyOf(d *storagev1.CSIDriver) Policy {
	if d == nil {
		return Policy{AttachRequired: true, FSGroupPolicy: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}
	}
	p := Policy{
		AttachRequired: d.Spec.AttachRequired == nil || *d.Spec.AttachRequired,
		PodInfoOnMount: d.Spec.PodInfoOnMount != nil && *d.Spec.PodInfoOnMount,
		SELinuxMount:   d.Spec.SELinuxMount != nil && *d.Spec.SELinuxMount,
		FSGroupPolicy:  storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy,
		Modes:          slices.Clone(d.Spec.VolumeLifecycleModes),
		Found:          true,
	}
	p.RequiresRepublish = d.Spec.RequiresRepublish != nil && *d.Spec.RequiresRepublish
	p.TokenRequests = slices.Clone(d.Spec.TokenRequests)
	p.TokenInSecrets = d.Spec.ServiceAccountTokenInSecrets != nil && *d.Spec.ServiceAccountTokenInSecrets
	if d.Spec.FSGroupPolicy != nil {
		p.FSGroupPolicy = *d.Spec.FSGroupPolicy
	}
	if len(p.Modes) == 0 {
		p.Modes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	return p
}

// CheckMode refuses a volume whose lifecycle mode the driver does not
// support, with the kubelet's messages (supportsVolumeLifecycleMode).
func (p Policy) CheckMode(driver string, ephemeral bool) error {
	mode := storagev1.VolumeLifecyclePersistent
	if ephemeral {
		mode = storagev1.VolumeLifecycleEphemeral
	}
	switch {
	case !p.Found && !ephemeral:
		return nil
	case !p.Found:
		return fmt.Errorf("volume mode %q not supported by driver %s (no CSIDriver object)", mode, driver)
	case slices.Contains(p.Modes, mode):
		return nil
	}
	return fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", mode, driver, p.Modes)
}

// NeedsAttach says whether a volume waits for its VolumeAttachment: inline
// volumes never do, as in the kubelet (CanAttach).
func (p Policy) NeedsAttach(s Source) bool { return p.AttachRequired && !s.Ephemeral }

// AttachmentName is the VolumeAttachment the attach-detach controller
// makes for a volume on a node.
func AttachmentName(volumeHandle, driver, nodeName string) string {
	return attachmentName(volumeHandle, driver, nodeName)
}

// CheckAttachment tells whether a VolumeAttachment says the volume is
// attached, with the kubelet's errors (verifyAttachmentStatus): one being
// deleted or reporting an attach error fails; one not attached yet is
// (false, nil).
func CheckAttachment(va *storagev1.VolumeAttachment) (bool, error) {
	switch {
	case va.DeletionTimestamp != nil:
		return false, errors.New("volume attachment is being deleted")
	case va.Status.Attached:
		return true, nil
	case va.Status.AttachError != nil:
		return false, errors.New(va.Status.AttachError.Message)
	}
	return false, nil
}
