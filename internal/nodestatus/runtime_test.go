package nodestatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestRuntimeFeaturesOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *runtimeapi.StatusResponse
		want RuntimeFeatures
	}{
		{"containerd 1.6: neither handlers nor features", &runtimeapi.StatusResponse{},
			RuntimeFeatures{Handlers: []v1.NodeRuntimeHandler{}}},
		{"containerd 2: the default handler and runc, Strict groups", &runtimeapi.StatusResponse{
			RuntimeHandlers: []*runtimeapi.RuntimeHandler{
				{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}},
				{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
				{Name: "bare"},
			},
			Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
		}, RuntimeFeatures{
			Handlers: []v1.NodeRuntimeHandler{
				{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}},
				{Name: "runc", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(false)}},
				{Name: "bare", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(false), UserNamespaces: ptr.To(false)}},
			},
			Features: &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)},
		}},
		{"features without Strict groups", &runtimeapi.StatusResponse{Features: &runtimeapi.RuntimeFeatures{}},
			RuntimeFeatures{Handlers: []v1.NodeRuntimeHandler{}, Features: &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(false)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RuntimeFeaturesOf(tc.in)
			if !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			st := Status(Identity{Name: "n"}, Observed{Runtime: got}, v1.NodeStatus{}, time.Unix(0, 0))
			if !apiequality.Semantic.DeepEqual(st.RuntimeHandlers, tc.want.Handlers) || !apiequality.Semantic.DeepEqual(st.Features, tc.want.Features) {
				t.Fatalf("status reports %+v %+v", st.RuntimeHandlers, st.Features)
			}
		})
	}
}
