package podsource

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestValidateHugePageVolumes(t *testing.T) {
	hugePod := func(medium v1.StorageMedium, sizes ...string) *v1.Pod {
		pod := validPod()
		pod.Spec.Volumes[0].VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: medium}}
		r := &pod.Spec.Containers[0].Resources
		for _, s := range sizes {
			r.Limits[v1.ResourceName("hugepages-"+s)] = resource.MustParse(s)
			r.Requests[v1.ResourceName("hugepages-"+s)] = resource.MustParse(s)
		}
		return pod
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string // "" for valid
	}{
		{"HugePages, one size", hugePod(v1.StorageMediumHugePages, "2Mi"), ""},
		{"HugePages-2Mi", hugePod("HugePages-2Mi", "2Mi", "1Gi"), ""},
		{"HugePages, no request", hugePod(v1.StorageMediumHugePages),
			`spec.volumes[0].emptyDir.medium: Invalid value: "HugePages": medium HugePages: hugePages storage requested, but there is no resource request for huge pages`},
		{"HugePages, two sizes", hugePod(v1.StorageMediumHugePages, "2Mi", "1Gi"),
			`spec.volumes[0].emptyDir.medium: Invalid value: "HugePages": medium HugePages can't be used if container requests multiple huge page sizes`},
		{"HugePages-1Gi, only 2Mi asked", hugePod("HugePages-1Gi", "2Mi"),
			`spec.volumes[0].emptyDir.medium: Invalid value: "HugePages-1Gi": medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages`},
		{"HugePages-big", hugePod("HugePages-big", "2Mi"),
			`spec.volumes[0].emptyDir.medium: Invalid value: "HugePages-big": medium HugePages-big: "big" is not a page size`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs []string
			for _, e := range Validate(tc.pod) {
				msgs = append(msgs, e.Error())
			}
			if tc.want == "" {
				if len(msgs) != 0 {
					t.Errorf("valid pod refused: %q", msgs)
				}
				return
			}
			if !slices.Contains(msgs, tc.want) {
				t.Errorf("messages %q lack %q", msgs, tc.want)
			}
		})
	}
}
