package lifecycle

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// Reasons a pod is refused for asking what berth cannot give. The API
// server accepted the pod (or the manifest passed berth's validation); the
// node is where it fails, so the pod is rejected with a reason (Failed)
// rather than started without what it asked for, or retried for ever.
const (
	reasonUnsupportedVolume       = "UnsupportedVolume"
	reasonUnsupportedRuntimeClass = "UnsupportedRuntimeClass"
	reasonUnsupportedPodField     = "UnsupportedPodField"
)

// PodFeaturesAdmitHandler refuses a pod that asks for what berth cannot
// give, in the kubelet's PodFeaturesAdmitHandler's stead. It reads only the
// pod. The kubelet runs that handler after its predicate handler; berth
// runs this one before the resource fit, so that a pod it cannot run is
// never admitted by preempting others.
func PodFeaturesAdmitHandler(node NodeFeatures) PodAdmitHandler {
	return HandlerFunc(func(attrs *PodAdmitAttributes) Result {
		if r, bad := unsupported(attrs.Pod.Pod, node); bad {
			return r
		}
		if r, bad := unsupportedUserNamespace(attrs.Pod.Pod, node); bad {
			return r
		}
		if r, bad := unsupportedClaims(attrs.Pod.Pod, node); bad {
			return r
		}
		return Result{Admit: true}
	})
}

// unsupported reports why berth cannot run pod at all, or false when it can
// try. It runs before the kubelet's admission checks, for pods of every
// source: some of these fields pass berth's manifest validation too.
func unsupported(pod *v1.Pod, node NodeFeatures) (Result, bool) {
	if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
		return Result{Reason: reasonUnsupportedRuntimeClass, Message: fmt.Sprintf(
			"runtimeClassName %q: berth runs every pod with the runtime's default handler and supports no runtime classes", *rc)}, true
	}
	for _, vol := range pod.Spec.Volumes {
		if kind, ok := csiVolume(vol.VolumeSource); ok && !node.CSIVolumes {
			why := node.CSIVolumesWhy
			if why == "" {
				why = "this node has no API server to read their claims and drivers from"
			}
			return Result{Reason: reasonUnsupportedVolume, Message: fmt.Sprintf("volume %q: %s volumes cannot be set up: %s", vol.Name, kind, why)}, true
		}
		if kind, ok := unsupportedVolume(vol.VolumeSource); ok {
			return Result{Reason: reasonUnsupportedVolume, Message: fmt.Sprintf(
				"volume %q: %s volumes are not supported by berth (emptyDir, hostPath, configMap, secret, downwardAPI, projected, image, and on a cluster node persistentVolumeClaim, ephemeral and csi are)",
				vol.Name, kind)}, true
		}
	}
	if path, why, ok := unsupportedField(pod); ok {
		return Result{Reason: reasonUnsupportedPodField, Message: path + ": " + why}, true
	}
	return Result{}, false
}

// csiVolume names the source of a volume that a CSI driver mounts.
func csiVolume(src v1.VolumeSource) (string, bool) {
	switch {
	case src.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim", true
	case src.Ephemeral != nil:
		return "ephemeral", true
	case src.CSI != nil:
		return "csi", true
	}
	return "", false
}

// unsupportedVolume names the source of a volume berth cannot set up.
func unsupportedVolume(src v1.VolumeSource) (string, bool) {
	switch {
	case src.EmptyDir != nil:
		// The volume manager makes disk, tmpfs and hugetlbfs emptyDirs.
		if m := src.EmptyDir.Medium; m != v1.StorageMediumDefault && m != v1.StorageMediumMemory && !v1helper.IsHugePageMedium(m) {
			return fmt.Sprintf("emptyDir medium %q", m), true
		}
		return "", false
	case src.HostPath != nil, src.ConfigMap != nil, src.Secret != nil,
		src.DownwardAPI != nil, src.Projected != nil:
		return "", false
	case src.Image != nil:
		// The runtime mounts it, if it can: ImageVolumeAdmitHandler decides.
		return "", false
	case src.PersistentVolumeClaim != nil, src.Ephemeral != nil, src.CSI != nil:
		// CSI drivers mount them, where the node has CSI: csiVolume.
		return "", false
	case src.NFS != nil:
		return "nfs", true
	}
	return "this kind of", true
}
