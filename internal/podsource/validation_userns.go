package podsource

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateHostUsers is the API server's validateHostUsers for a pod of
// hostUsers: false (with its UserNamespacesHostNetwork and
// UserNamespacesWithVolumeDevices options off, their defaults): no host
// namespace may be shared with a pod whose users are not the node's, and
// block devices cannot be idmapped. The field names are the API server's.
func validateHostUsers(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	if spec.HostUsers == nil || *spec.HostUsers {
		return nil
	}
	const why = "when `hostUsers` is false"
	var errs field.ErrorList
	if spec.OS != nil && spec.OS.Name == v1.Windows {
		errs = append(errs, field.Forbidden(fldPath.Child("hostUsers"), "cannot be set for a windows pod"))
	}
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(fldPath.Child("hostNetwork"), why))
	}
	if spec.HostPID {
		errs = append(errs, field.Forbidden(fldPath.Child("HostPID"), why))
	}
	if spec.HostIPC {
		errs = append(errs, field.Forbidden(fldPath.Child("HostIPC"), why))
	}
	for _, list := range []struct {
		name       string
		containers []v1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.containers {
			if len(list.containers[i].VolumeDevices) > 0 {
				errs = append(errs, field.Forbidden(fldPath.Child(list.name).Index(i).Child("volumeDevices"), why))
			}
		}
	}
	return errs
}
