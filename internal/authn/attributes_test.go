package authn

import (
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
)

func TestRequestAttributes(t *testing.T) {
	tests := []struct {
		method, path string
		verb         string
		subresources []string
	}{
		// The streams: the verb follows the method, upgrade or not.
		{"POST", "/exec/default/web/app", "create", []string{"proxy"}},
		{"GET", "/exec/default/web/app", "get", []string{"proxy"}},
		{"POST", "/attach/default/web/app", "create", []string{"proxy"}},
		{"GET", "/attach/default/web/app", "get", []string{"proxy"}},
		{"POST", "/portForward/default/web", "create", []string{"proxy"}},
		{"GET", "/portForward/default/web", "get", []string{"proxy"}},
		{"GET", "/containerLogs/default/web/app", "get", []string{"proxy"}},
		// Their own subresource.
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/stats/", "get", []string{"stats"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/cadvisor", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/logs/messages", "get", []string{"log"}},
		{"POST", "/checkpoint/default/web/app", "create", []string{"checkpoint"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		// Fine-grained, with proxy to fall back on.
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/pods/default/web/events", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/syncloop", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		// berth's own paths, and look-alikes, are proxy.
		{"GET", "/node", "get", []string{"proxy"}},
		{"GET", "/events", "get", []string{"proxy"}},
		{"GET", "/statsfoo", "get", []string{"proxy"}},
		{"GET", "/podsx", "get", []string{"proxy"}},
		{"GET", "/", "get", []string{"proxy"}},
		{"GET", "", "get", []string{"proxy"}},
		// Paths are judged cleaned: never stats for what is exec.
		{"POST", "/stats/../exec/default/web/app", "create", []string{"proxy"}},
		{"GET", "/exec/../stats/summary", "get", []string{"stats"}},
		{"GET", "//stats//summary", "get", []string{"stats"}},
		// Verbs.
		{"HEAD", "/healthz", "get", []string{"healthz", "proxy"}},
		{"PUT", "/x", "update", []string{"proxy"}},
		{"PATCH", "/x", "patch", []string{"proxy"}},
		{"DELETE", "/pods/default/web", "delete", []string{"pods", "proxy"}},
		{"OPTIONS", "/pods", "", []string{"pods", "proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			got := RequestAttributes("node-1", tt.method, tt.path)
			var want []authorizationv1.ResourceAttributes
			for _, sub := range tt.subresources {
				want = append(want, authorizationv1.ResourceAttributes{
					Verb: tt.verb, Version: "v1", Resource: "nodes", Subresource: sub, Name: "node-1",
				})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
		})
	}
}
