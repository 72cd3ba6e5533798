package authn

import (
	"net/http"
	"path"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// Subresources of the node object that the secure API's paths map to.
const (
	subresourceProxy      = "proxy"
	subresourceStats      = "stats"
	subresourceMetrics    = "metrics"
	subresourceLog        = "log"
	subresourceCheckpoint = "checkpoint"
	subresourceStatusz    = "statusz"
	subresourcePods       = "pods"
	subresourceHealthz    = "healthz"
	subresourceConfigz    = "configz"
)

// RequestAttributes is what a request to the secure API asks of the API
// server's authorizer, exactly as the kubelet asks it
// (pkg/kubelet/server/auth.go, GetRequestAttributes): the node object
// nodeName (core group, v1, resource nodes), a verb from the HTTP method,
// and a subresource from the path. The caller may go ahead when any of the
// returned attributes is allowed: /pods, /runningpods, /healthz and
// /configz ask for their own subresource first and fall back to proxy (the
// kubelet's fine-grained authorization, GA and locked on in 1.36), so that
// callers granted only nodes/proxy keep working.
//
// The verb comes from the method alone, upgrades included: exec, attach and
// portForward are create over POST (SPDY) and get over GET (WebSocket), as
// in the kubelet. An empty verb means a method the kubelet has no verb for.
func RequestAttributes(nodeName, method, urlPath string) []authorizationv1.ResourceAttributes {
	// The path is cleaned because the mux serves clean paths only (it
	// redirects the others without running a handler): "/stats/../exec/x"
	// must be judged as what it is, never as stats.
	p := path.Clean("/" + urlPath)
	var subresources []string
	switch {
	case under(p, "/pods"), under(p, "/runningpods"):
		subresources = append(subresources, subresourcePods)
	case under(p, "/healthz"):
		subresources = append(subresources, subresourceHealthz)
	case under(p, "/configz"):
		subresources = append(subresources, subresourceConfigz)
	}
	switch {
	case under(p, "/stats"):
		subresources = append(subresources, subresourceStats)
	case under(p, "/metrics"):
		subresources = append(subresources, subresourceMetrics)
	case under(p, "/logs"):
		// "log", as the pods/log subresource is called.
		subresources = append(subresources, subresourceLog)
	case under(p, "/checkpoint"):
		subresources = append(subresources, subresourceCheckpoint)
	case under(p, "/statusz"):
		subresources = append(subresources, subresourceStatusz)
	case under(p, "/flagz"):
		subresources = append(subresources, subresourceConfigz)
	default:
		subresources = append(subresources, subresourceProxy)
	}
	v := verb(method)
	attrs := make([]authorizationv1.ResourceAttributes, len(subresources))
	for i, sub := range subresources {
		attrs[i] = authorizationv1.ResourceAttributes{
			Verb:        v,
			Group:       "",
			Version:     "v1",
			Resource:    "nodes",
			Subresource: sub,
			Name:        nodeName,
		}
	}
	return attrs
}

// verb is the API verb of an HTTP method. HEAD is get, as the API server
// has it; the kubelet leaves it empty.
func verb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// under reports whether p is dir or lies below it: "/stats" and
// "/stats/summary" are under "/stats", "/statsfoo" is not.
func under(p, dir string) bool {
	return p == dir || (strings.HasPrefix(p, dir) && p[len(dir)] == '/')
}
