package agent

import (
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
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

// refusal is why pod is refused before its resources are counted, in the
// order of the kubelet's admit handlers (NewMainKubelet): its sysctls
// against the node's allowlist (the sysctl handler comes before the
// predicate handler), then the pod's OS (the predicate handler's first
// checks), then what berth cannot honour, so that a pod for another OS is
// refused for its OS as by the kubelet, whatever else it asks for.
func refusal(pod *v1.Pod, node *v1.Node, sysctls *admission.SysctlAllowlist) (admission.Result, bool) {
	if r, bad := sysctls.Rejection(pod); bad {
		return r, true
	}
	if r, bad := admission.EarlyRejection(pod, node); bad {
		return r, true
	}
	return unsupported(pod)
}

// nodeSysctls is the node's sysctl allowlist, built as the kubelet builds
// it at start-up (NewMainKubelet): the safe sysctls for the running kernel
// (SafeSysctlAllowlist) and the allowed unsafe ones. A kernel version that
// cannot be read leaves out the safe sysctls that depend on it, as the
// kubelet does, rather than stopping berth.
func nodeSysctls(allowedUnsafe []string, log *slog.Logger) (*admission.SysctlAllowlist, error) {
	kernel, err := admission.KernelVersion()
	if err != nil {
		log.Error("the kernel version is unknown: the safe sysctls namespaced only from some version on are not allowed", "err", err)
	}
	sysctls, err := admission.NewSysctlAllowlist(append(admission.SafeSysctls(kernel), allowedUnsafe...))
	if err != nil {
		return nil, fmt.Errorf("sysctl allowlist: %w", err)
	}
	return sysctls, nil
}

// unsupported reports why berth cannot run pod at all, or false when it can
// try. It runs before the kubelet's admission checks, for pods of every
// source: some of these fields pass berth's manifest validation too.
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
	if path, why, ok := unsupportedField(pod); ok {
		return admission.Result{Reason: reasonUnsupportedPodField, Message: path + ": " + why}, true
	}
	return admission.Result{}, false
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
