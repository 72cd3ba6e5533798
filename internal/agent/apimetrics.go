package agent

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// apiRequests counts berth's requests to the API server by verb, resource
// and answer: what a pod's lifecycle costs the control plane.
type apiRequests struct {
	total *prometheus.CounterVec
}

func newAPIRequests(reg prometheus.Registerer) (*apiRequests, error) {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_apiserver_requests_total",
		Help: "Requests berth sent to the API server, by HTTP method, resource (with subresource) and status code.",
	}, []string{"method", "resource", "code"})
	if err := reg.Register(total); err != nil {
		return nil, err
	}
	return &apiRequests{total: total}, nil
}

// wrap counts each request rt carries.
func (a *apiRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		method := r.Method
		if r.URL.Query().Get("watch") == "true" {
			method = "WATCH"
		}
		a.total.WithLabelValues(method, apiResource(r.URL.Path), code).Inc()
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// apiResource is the resource of an API path, with its subresource:
// /api/v1/namespaces/ns/pods/p/status is "pods/status", /api/v1/nodes is
// "nodes", /apis/coordination.k8s.io/v1/namespaces/x/leases/n is "leases".
func apiResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api, v1
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis, group, version
	default:
		return "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return "namespaces"
		}
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}
