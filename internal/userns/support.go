package userns

import (
	"fmt"

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
