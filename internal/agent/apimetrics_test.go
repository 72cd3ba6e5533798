package agent

import "testing"

func TestAPIResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/pods/web/status": "pods/status",
		"/api/v1/namespaces/default/pods":            "pods",
		"/api/v1/pods":                               "pods",
		"/api/v1/nodes/n1":                           "nodes",
		"/api/v1/nodes/n1/status":                    "nodes/status",
		"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1": "leases",
		"/api/v1/namespaces/default/serviceaccounts/default/token":          "serviceaccounts/token",
		"/api/v1/namespaces/default":                                        "namespaces",
		"/version":                                                          "other",
	} {
		if got := apiResource(path); got != want {
			t.Errorf("apiResource(%q) = %q, want %q", path, got, want)
		}
	}
}
