package podsource

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestValidateHostUsers(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		want []string // the errors, "field: detail"
	}{
		{"unset", v1.PodSpec{HostNetwork: true, HostPID: true}, nil},
		{"host users", v1.PodSpec{HostUsers: ptr.To(true), HostIPC: true}, nil},
		{"own namespace", v1.PodSpec{HostUsers: ptr.To(false)}, nil},
		{"host network", v1.PodSpec{HostUsers: ptr.To(false), HostNetwork: true},
			[]string{"spec.hostNetwork: Forbidden: when `hostUsers` is false"}},
		{"host pid and ipc", v1.PodSpec{HostUsers: ptr.To(false), HostPID: true, HostIPC: true},
			[]string{"spec.HostPID: Forbidden: when `hostUsers` is false", "spec.HostIPC: Forbidden: when `hostUsers` is false"}},
		{"volume devices", v1.PodSpec{HostUsers: ptr.To(false),
			InitContainers: []v1.Container{{VolumeDevices: []v1.VolumeDevice{{Name: "d", DevicePath: "/dev/x"}}}}},
			[]string{"spec.initContainers[0].volumeDevices: Forbidden: when `hostUsers` is false"}},
		{"windows", v1.PodSpec{HostUsers: ptr.To(false), OS: &v1.PodOS{Name: v1.Windows}},
			[]string{"spec.hostUsers: Forbidden: cannot be set for a windows pod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateHostUsers(&tc.spec, field.NewPath("spec"))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want %v", errs, tc.want)
			}
			for i, e := range errs {
				if e.Error() != tc.want[i] {
					t.Errorf("error %d = %q, want %q", i, e.Error(), tc.want[i])
				}
			}
		})
	}
}
