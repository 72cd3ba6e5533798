package agent

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
)

// Reasons a pod of the API server is refused for asking what berth cannot
// give. The API server accepted the pod; the node is where it fails, so the
// pod is rejected with a reason (Failed) rather than retried for ever.
const (
	reasonUnsupportedVolume       = "UnsupportedVolume"
	reasonUnsupportedRuntimeClass = "UnsupportedRuntimeClass"
)

// unsupported reports why berth cannot run pod at all, or false when it can
// try. Static and applied pods never get here with such a spec: their
// validation refuses it with the field.
func unsupported(pod *v1.Pod) (admission.Result, bool) {
	if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
		return admission.Result{Reason: reasonUnsupportedRuntimeClass, Message: fmt.Sprintf(
			"runtimeClassName %q: berth runs every pod with the runtime's default handler and supports no runtime classes", *rc)}, true
	}
	for _, vol := range pod.Spec.Volumes {
		if kind, ok := unsupportedVolume(vol.VolumeSource); ok {
			return admission.Result{Reason: reasonUnsupportedVolume, Message: fmt.Sprintf(
				"volume %q: %s volumes are not supported by berth (emptyDir, hostPath, configMap, secret, downwardAPI and projected are)",
				vol.Name, kind)}, true
		}
	}
	return admission.Result{}, false
}

// unsupportedVolume names the source of a volume berth cannot set up.
func unsupportedVolume(src v1.VolumeSource) (string, bool) {
	switch {
	case src.EmptyDir != nil, src.HostPath != nil, src.ConfigMap != nil, src.Secret != nil,
		src.DownwardAPI != nil, src.Projected != nil:
		return "", false
	case src.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim", true
	case src.Ephemeral != nil:
		return "ephemeral", true
	case src.CSI != nil:
		return "csi", true
	case src.NFS != nil:
		return "nfs", true
	case src.Image != nil:
		return "image", true
	}
	return "this kind of", true
}
