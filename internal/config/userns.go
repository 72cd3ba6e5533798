package config

import (
	"math"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// DefaultUserNamespacesIDsPerPod is the kubelet's userNamespaces.idsPerPod
// default: 65536 host IDs for each pod of hostUsers: false.
const DefaultUserNamespacesIDsPerPod = 65536

// nameIDsPerPod has no flag, as on the kubelet.
const nameIDsPerPod = "userNamespaces.idsPerPod"

func applyUserNamespacesFile(ids *int64, kc *kubeletconfigv1beta1.KubeletConfiguration) {
	if u := kc.UserNamespaces; u != nil && u.IDsPerPod != nil {
		*ids = *u.IDsPerPod
	}
}

// validateIDsPerPod is the kubelet's validation of idsPerPod
// (validation_linux.go): at least and a multiple of 65536, within uint32.
func validateIDsPerPod(ids int64) error {
	switch {
	case ids < DefaultUserNamespacesIDsPerPod:
		return fieldError(nameIDsPerPod, "%d must not be less than %d", ids, DefaultUserNamespacesIDsPerPod)
	case ids%DefaultUserNamespacesIDsPerPod != 0:
		return fieldError(nameIDsPerPod, "%d must be a multiple of %d", ids, DefaultUserNamespacesIDsPerPod)
	case ids > math.MaxUint32:
		return fieldError(nameIDsPerPod, "%d must not be more than %d", ids, int64(math.MaxUint32))
	}
	return nil
}
