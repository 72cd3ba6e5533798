package kuberuntime

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func imageVolumePod() *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "berth.local/tools:1"}}},
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}}}
}

// An image volume's mount carries the pulled image and the subPath within
// it, no host path, and is read-only whatever the volumeMount says (kubelet
// makeMounts with the image plugin's ReadOnly attribute).
func TestImageVolumeMounts(t *testing.T) {
	tools := &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "berth.local/tools:1"}
	hostToContainer := v1.MountPropagationHostToContainer
	env := []envVar{{"TOOL", "bin"}}
	for _, tc := range []struct {
		name  string
		mount v1.VolumeMount
		want  *runtimeapi.Mount
	}{
		{"whole image", v1.VolumeMount{Name: "tools", MountPath: "/tools"},
			&runtimeapi.Mount{ContainerPath: "/tools", Image: tools, Readonly: true}},
		{"read-only asked", v1.VolumeMount{Name: "tools", MountPath: "/tools", ReadOnly: true},
			&runtimeapi.Mount{ContainerPath: "/tools", Image: tools, Readonly: true}},
		{"subPath", v1.VolumeMount{Name: "tools", MountPath: "/bin2", SubPath: "usr/./bin/"},
			&runtimeapi.Mount{ContainerPath: "/bin2", Image: tools, ImageSubPath: "usr/bin", Readonly: true}},
		{"subPathExpr", v1.VolumeMount{Name: "tools", MountPath: "/x", SubPathExpr: "opt/$(TOOL)"},
			&runtimeapi.Mount{ContainerPath: "/x", Image: tools, ImageSubPath: "opt/bin", Readonly: true}},
		{"propagation", v1.VolumeMount{Name: "tools", MountPath: "/p", MountPropagation: &hostToContainer},
			&runtimeapi.Mount{ContainerPath: "/p", Image: tools, Readonly: true,
				Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}},
		{"an emptyDir beside it", v1.VolumeMount{Name: "data", MountPath: "/data"},
			&runtimeapi.Mount{ContainerPath: "/data", HostPath: "/v/data"}},
	} {
		c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{tc.mount}}
		opts := ContainerOptions{VolumePaths: map[string]string{"tools": "", "data": "/v/data"},
			ImageVolumes: map[string]*runtimeapi.ImageSpec{"tools": tools}}
		got, err := makeMounts(imageVolumePod(), c, opts, env)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], tc.want) {
			t.Errorf("%s: mounts %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestImageVolumeMountErrors(t *testing.T) {
	tools := &runtimeapi.ImageSpec{Image: "sha256:abc"}
	for _, tc := range []struct {
		name    string
		mount   v1.VolumeMount
		images  map[string]*runtimeapi.ImageSpec
		wantErr string
	}{
		// Never a container with the volume silently missing.
		{"not pulled", v1.VolumeMount{Name: "tools", MountPath: "/tools"}, nil, `image volume "tools" has not been pulled`},
		{"empty image", v1.VolumeMount{Name: "tools", MountPath: "/tools"},
			map[string]*runtimeapi.ImageSpec{"tools": {}}, `has not been pulled`},
		{"climbing subPath", v1.VolumeMount{Name: "tools", MountPath: "/t", SubPath: "../etc"},
			map[string]*runtimeapi.ImageSpec{"tools": tools}, `subPath "../etc": must not contain '..'`},
		{"absolute subPath", v1.VolumeMount{Name: "tools", MountPath: "/t", SubPath: "/etc"},
			map[string]*runtimeapi.ImageSpec{"tools": tools}, `must not be an absolute path`},
	} {
		c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{tc.mount}}
		_, err := makeMounts(imageVolumePod(), c, ContainerOptions{ImageVolumes: tc.images}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// The runtime resolves an image volume's subPath inside the image: berth
// prepares no directory for it on the host.
func TestSubPathsSkipImageVolumes(t *testing.T) {
	pod := imageVolumePod()
	pod.Spec.Containers = []v1.Container{{Name: "app", VolumeMounts: []v1.VolumeMount{
		{Name: "tools", MountPath: "/bin2", SubPath: "usr/bin"},
		{Name: "data", MountPath: "/cfg", SubPath: "cfg"},
	}}}
	got, err := SubPaths(pod, &pod.Spec.Containers[0], ContainerOptions{VolumePaths: map[string]string{"tools": "", "data": "/v/data"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []SubPath{{MountIndex: 1, Volume: "data", VolumePath: "/v/data", Path: "cfg"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SubPaths = %+v, want %+v", got, want)
	}
}
