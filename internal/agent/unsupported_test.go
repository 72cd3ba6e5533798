package agent

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestUnsupported(t *testing.T) {
	withVolume := func(src v1.VolumeSource) *v1.Pod {
		p := &v1.Pod{}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: src}}
		return p
	}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		wantReason string
		wantText   string
	}{
		{"plain", &v1.Pod{}, "", ""},
		{"token volume", withVolume(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}), "", ""},
		{"claim", withVolume(v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}),
			reasonUnsupportedVolume, `volume "data": persistentVolumeClaim volumes are not supported`},
		{"iscsi", withVolume(v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{}}), reasonUnsupportedVolume, "this kind of volumes"},
		{"runtime class", &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr.To("gvisor")}},
			reasonUnsupportedRuntimeClass, `runtimeClassName "gvisor"`},
	} {
		r, bad := unsupported(tc.pod)
		if bad != (tc.wantReason != "") || r.Reason != tc.wantReason || !strings.Contains(r.Message, tc.wantText) {
			t.Errorf("%s: %v %+v, want %q containing %q", tc.name, bad, r, tc.wantReason, tc.wantText)
		}
	}
}
