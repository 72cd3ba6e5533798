package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// servePortForward serves /portForward/{namespace}/{pod}[/{uid}] as the
// kubelet's getPortForward does: the runtime prepares a port-forward
// stream into the pod's sandbox and berth proxies the upgraded connection
// to it.
func (h *streamingHandler) servePortForward(w http.ResponseWriter, r *http.Request) {
	namespace, pod, uid := r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid"))
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		// The API server tunnels SPDY over WebSocket only to nodes that
		// declare ExtendWebSocketsToKubelet, which berth does not: it
		// speaks SPDY to berth instead.
		http.Error(w, "SPDY tunneled over WebSocket is not supported; connect with SPDY, or WebSocket with port=",
			http.StatusBadRequest)
		return
	}
	ports, err := portForwardPorts(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !httpstream.IsUpgradeRequest(r) {
		http.Error(w, "port forwarding needs a connection upgrade (SPDY or WebSocket), as kubectl port-forward makes",
			http.StatusBadRequest)
		return
	}
	sandboxID, podUID, err := h.pods.RunningPodSandboxID(namespace, pod)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		h.log.Error("finding a pod sandbox to forward ports to", "pod", namespace+"/"+pod, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	case uid != "" && uid != podUID:
		// The pod of that name is another one than the caller meant.
		http.Error(w, fmt.Sprintf("pod %s/%s with UID %s not found", namespace, pod, uid), http.StatusNotFound)
		return
	}
	raw, err := h.rt.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		streamURLError(w, err)
		return
	}
	target, err := parseStreamURL(streamPortForward, raw)
	if err != nil {
		streamURLError(w, err)
		return
	}
	duration := h.proxyStream(w, r, target)
	h.log.Info("stream ended", "kind", streamPortForward, "pod", namespace+"/"+pod, "ports", ports, "duration", duration)
}

// portForwardPorts reads the ports of a port-forward request as the
// kubelet does (portforward.NewV4Options): a WebSocket client names them
// in the query, port=80&port=443 or port=80,443, and must name one; a SPDY
// client names each stream's port in the stream's headers, so any port
// parameter (the API server passes kubectl's on) is not the runtime's
// business.
func portForwardPorts(r *http.Request) ([]int32, error) {
	if !wsstream.IsWebSocketRequest(r) {
		return nil, nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("malformed query %q: %w", r.URL.RawQuery, err)
	}
	values := q[v1.PortHeader]
	if len(values) == 0 {
		return nil, fmt.Errorf("query parameter %q is required", v1.PortHeader)
	}
	var ports []int32
	for _, value := range values {
		if value == "" {
			return nil, fmt.Errorf("query parameter %q cannot be empty", v1.PortHeader)
		}
		for _, p := range strings.Split(value, ",") {
			port, err := strconv.ParseUint(p, 10, 16)
			switch {
			case err != nil:
				return nil, fmt.Errorf("unable to parse %q as a port: %w", p, err)
			case port < 1:
				return nil, fmt.Errorf("port %q must be > 0", p)
			}
			ports = append(ports, int32(port))
		}
	}
	return ports, nil
}
