package userns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// HandlerSupport is the kubelet's HandlerSupportsUserNamespaces over a CRI
// status: "" when the runtime handler (berth runs every pod with the
// default one, "") reports user_namespaces among its features, else why
// not. A runtime that lists no handlers at all is too old to say, and is
// taken as lacking support, as the kubelet takes it.
func HandlerSupport(status *runtimeapi.StatusResponse, handler string) string {
	hs := status.GetRuntimeHandlers()
	if len(hs) == 0 {
		return "the runtime reports no runtime handlers and so no user namespace support (CRI RuntimeStatus runtime_handlers)"
	}
	for _, h := range hs {
		if h.GetName() != handler {
			continue
		}
		if h.GetFeatures().GetUserNamespaces() {
			return ""
		}
		return fmt.Sprintf("the runtime handler %q reports no user namespace support (features.user_namespaces)", handler)
	}
	return fmt.Sprintf("the runtime handler %q is not known to the runtime", handler)
}

// UnsupportedMessage is the kubelet's refusal of a user namespace pod on a
// runtime without support, with why.
func UnsupportedMessage(why string) string {
	return "can't set `spec.hostUsers: false`, runtime does not support user namespaces: " + why
}

// ReachableFromUserNamespace says why the runtime could not reach a
// user-namespaced pod's root filesystem under dir ("" when it can): runc
// prepares that filesystem from inside the pod's user namespace, as an
// unprivileged host ID, so every directory from / down to dir must be
// searchable by other users. containerd makes its own state directories
// so (0711); a berth root dir made beforehand without it (mkdir -m 700, a
// temp dir) would fail every sandbox of such a pod.
func ReachableFromUserNamespace(dir string) string {
	if dir == "" {
		return ""
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("cannot check the runtime's state directory: %v", err)
		case err == nil && fi.Mode().Perm()&0o001 == 0:
			return fmt.Sprintf("%s (mode %04o) is not searchable by other users, so the runtime cannot reach a pod's root filesystem from its user namespace: chmod o+x %s", d, fi.Mode().Perm(), d)
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
