package lifecycle

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
)

func TestRuntimeMountsImages(t *testing.T) {
	for _, tc := range []struct {
		rt   RuntimeInfo
		want bool
	}{
		{RuntimeInfo{"containerd", "1.6.20~ds1"}, false}, // Debian 12's package
		{RuntimeInfo{"containerd", "v1.7.24"}, false},
		{RuntimeInfo{"containerd", "v2.0.5"}, false},
		{RuntimeInfo{"containerd", "v2.1.0"}, true},
		{RuntimeInfo{"containerd", "v2.1.0-rc.1"}, true}, // read as 2.1, whose candidates mount images too
		{RuntimeInfo{"containerd", "v2.4.2"}, true},
		{RuntimeInfo{"containerd", "v3.0.0"}, true},
		{RuntimeInfo{"Containerd", "2.2.0"}, true},
		{RuntimeInfo{"cri-o", "1.30.4"}, false},
		{RuntimeInfo{"cri-o", "1.31.0"}, true},
		{RuntimeInfo{"containerd", "a9f2b3c"}, false}, // a commit, not a version
		{RuntimeInfo{"containerd", ""}, false},
		{RuntimeInfo{"remote", "9.9.9"}, false}, // a runtime berth does not know
		{RuntimeInfo{}, false},
	} {
		if got := RuntimeMountsImages(tc.rt); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.rt, got, tc.want)
		}
	}
}

func TestImageVolumeAdmitHandler(t *testing.T) {
	imagePod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "berth.local/tools:1"}}},
	}}}
	plain := &v1.Pod{Spec: v1.PodSpec{Volumes: imagePod.Spec.Volumes[:1]}}
	old := RuntimeInfo{"containerd", "1.6.20~ds1"}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		rt       RuntimeInfo
		wantText []string // empty: admitted
	}{
		{"image volume on containerd 2.4", imagePod, RuntimeInfo{"containerd", "v2.4.2"}, nil},
		{"image volume on containerd 1.6", imagePod, old,
			[]string{`volume "tools"`, "containerd 1.6.20~ds1", "containerd 2.1 or later"}},
		{"image volume on an unknown runtime", imagePod, RuntimeInfo{}, []string{`volume "tools"`, "an unknown runtime"}},
		{"no image volume on containerd 1.6", plain, old, nil},
	} {
		r := ImageVolumeAdmitHandler(tc.rt).Admit(&PodAdmitAttributes{Pod: admission.NewPodInfo(tc.pod)})
		if r.Admit != (len(tc.wantText) == 0) {
			t.Errorf("%s: %+v", tc.name, r)
			continue
		}
		if r.Admit {
			continue
		}
		if r.Reason != reasonUnsupportedVolume {
			t.Errorf("%s: reason %q, want %q", tc.name, r.Reason, reasonUnsupportedVolume)
		}
		for _, text := range tc.wantText {
			if !strings.Contains(r.Message, text) {
				t.Errorf("%s: message %q lacks %q", tc.name, r.Message, text)
			}
		}
	}
}
