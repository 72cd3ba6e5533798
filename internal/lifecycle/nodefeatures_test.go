package lifecycle

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/admission"
)

func TestUserNamespaceAdmission(t *testing.T) {
	supported := NodeFeatures{UserNamespaces: true}
	lacking := NodeFeatures{UserNamespacesWhy: `the runtime handler "" reports no user namespace support`}
	const refusal = "spec.hostUsers: can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	for _, tc := range []struct {
		name        string
		hostUsers   *bool
		node        NodeFeatures
		wantMessage string // "": admitted
	}{
		{"own namespace, runtime supports it", ptr.To(false), supported, ""},
		{"own namespace, runtime lacks it", ptr.To(false), lacking,
			refusal + `: the runtime handler "" reports no user namespace support`},
		{"own namespace, nothing known", ptr.To(false), NodeFeatures{}, refusal},
		{"host users, runtime lacks it", ptr.To(true), lacking, ""},
		{"unset, runtime lacks it", nil, lacking, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{HostUsers: tc.hostUsers}}
			r := PodFeaturesAdmitHandler(tc.node).Admit(&PodAdmitAttributes{Pod: admission.NewPodInfo(pod)})
			if tc.wantMessage == "" {
				if !r.Admit {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != reasonUnsupportedPodField || r.Message != tc.wantMessage {
				t.Errorf("got %+v, want %s: %q", r, reasonUnsupportedPodField, tc.wantMessage)
			}
		})
	}
}
