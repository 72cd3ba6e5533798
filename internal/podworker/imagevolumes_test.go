package podworker

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMountedImageVolumes(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1"}}},
		{Name: "model", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "model:2"}}},
		{Name: "unused", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "unused:3"}}},
	}}}
	for _, tc := range []struct {
		name   string
		mounts []string
		want   []string
	}{
		{"none", nil, nil},
		{"no image volume", []string{"data"}, nil},
		{"mount order, each once", []string{"model", "data", "tools", "model"}, []string{"model", "tools"}},
	} {
		c := &v1.Container{}
		for i, m := range tc.mounts {
			c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: m, MountPath: "/m" + string(rune('a'+i))})
		}
		var got []string
		for _, v := range mountedImageVolumes(pod, c) {
			got = append(got, v.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// imageVolumeExecPod is execPod whose app mounts image volume tools (its
// etc directory by subPath) under pull policy policy.
func imageVolumeExecPod(policy v1.PullPolicy) *v1.Pod {
	pod := execPod("app")
	pod.Spec.Volumes = []v1.Volume{{Name: "tools", VolumeSource: v1.VolumeSource{
		Image: &v1.ImageVolumeSource{Reference: "tools:1", PullPolicy: policy}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "tools", MountPath: "/tools", SubPath: "etc"}}
	return pod
}

// A container that mounts an image volume is created once the volume's
// image is pulled, with the image in its mount.
func TestExecuteImageVolume(t *testing.T) {
	e := newExecEnv(t, imageVolumeExecPod(v1.PullIfNotPresent))
	e.sync()
	checkCalls(t, "calls", mutations(e.rt), []string{"RunPodSandbox u1", "PullImage tools:1", "PullImage busybox", "CreateContainer app", "StartContainer"})
	cfg := e.rt.ContainerConfig(e.containerID(t, "app"))
	want := &runtimeapi.Mount{ContainerPath: "/tools", Readonly: true, ImageSubPath: "etc",
		Image: &runtimeapi.ImageSpec{Image: "tools:1", UserSpecifiedImage: "tools:1"}}
	if len(cfg.Mounts) == 0 || !reflect.DeepEqual(cfg.Mounts[0], want) {
		t.Errorf("mounts %v, want first %v", cfg.Mounts, want)
	}
	if !slices.Contains(e.events.list(), `Normal Pulling Pulling image "tools:1"`) {
		t.Errorf("events %q lack the volume image's pull", e.events.list())
	}
}

// A volume image that cannot be had keeps the containers mounting it from
// being created, with the kubelet's waiting reasons, and a failed pull
// backs off.
func TestExecuteImageVolumeFailures(t *testing.T) {
	t.Run("never pulled", func(t *testing.T) {
		e := newExecEnv(t, imageVolumeExecPod(v1.PullNever))
		e.sync()
		if n := len(e.rt.CallsOf("CreateContainer", "PullImage")); n != 0 {
			t.Errorf("%d creations or pulls, want none", n)
		}
		if w := e.w.waiting["app"]; w.Reason != reasonErrImageNeverPull {
			t.Errorf("waiting %+v, want %s", w, reasonErrImageNeverPull)
		}
	})
	t.Run("pull fails, then backs off", func(t *testing.T) {
		e := newExecEnv(t, imageVolumeExecPod(v1.PullAlways))
		e.rt.Fail("PullImage tools:1", errors.New("registry down"))
		next := e.sync()
		if w := e.w.waiting["app"]; w.Reason != reasonErrImagePull {
			t.Errorf("waiting %+v, want %s", w, reasonErrImagePull)
		}
		if next <= 0 {
			t.Errorf("next sync in %v, want the pull back-off", next)
		}
		e.rt.ClearCalls()
		e.sync()
		if w := e.w.waiting["app"]; w.Reason != reasonImagePullBackOff {
			t.Errorf("waiting %+v, want %s", w, reasonImagePullBackOff)
		}
		if n := len(e.rt.CallsOf("PullImage", "CreateContainer")); n != 0 {
			t.Errorf("%d pulls or creations within the back-off, want none", n)
		}
		if !slices.Contains(e.events.list(), `Warning Failed Error: Back-off pulling image "tools:1"`) {
			t.Errorf("events %q lack the back-off", e.events.list())
		}
	})
}

func TestVolumeImageName(t *testing.T) {
	for _, tc := range []struct {
		img  *runtimeapi.Image
		want string
	}{
		{&runtimeapi.Image{Id: "sha256:1", RepoTags: []string{"a:1"}, RepoDigests: []string{"a@sha256:2"}}, "a@sha256:2"},
		{&runtimeapi.Image{Id: "sha256:1", RepoTags: []string{"berth.local/tools:1", "tools:latest"}}, "berth.local/tools:1"},
		{&runtimeapi.Image{Id: "sha256:1"}, "sha256:1"},
	} {
		if got := volumeImageName(tc.img); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.img, got, tc.want)
		}
	}
}
