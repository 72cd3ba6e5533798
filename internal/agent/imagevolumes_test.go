package agent

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A wanted pod's image volumes are images in use, as its containers' are.
func TestPodImages(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Image: "init:1"}},
		Containers:     []v1.Container{{Image: "app:1"}},
		Volumes: []v1.Volume{
			{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1"}}},
		},
	}}
	if got, want := podImages(pod), []string{"init:1", "app:1", "tools:1"}; !slices.Equal(got, want) {
		t.Errorf("podImages = %v, want %v", got, want)
	}
}

func TestMountedImages(t *testing.T) {
	st := &runtimeapi.ContainerStatus{Mounts: []*runtimeapi.Mount{
		{ContainerPath: "/data", HostPath: "/v/data"},
		{ContainerPath: "/tools", Image: &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "tools:1"}},
		{ContainerPath: "/odd", Image: &runtimeapi.ImageSpec{}},
	}}
	if got, want := mountedImages(st), []string{"sha256:abc"}; !slices.Equal(got, want) {
		t.Errorf("mountedImages = %v, want %v", got, want)
	}
	if got := mountedImages(&runtimeapi.ContainerStatus{}); len(got) != 0 {
		t.Errorf("no mounts: %v", got)
	}
}
