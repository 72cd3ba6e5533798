package kuberuntime

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var testVolumes = map[string]string{
	"data":  "/var/lib/berth/pods/u1/volumes/kubernetes.io~empty-dir/data",
	"host":  "/srv/shared",
	"empty": "",
}

func TestMakeMounts(t *testing.T) {
	hostToContainer := v1.MountPropagationHostToContainer
	bidirectional := v1.MountPropagationBidirectional
	none := v1.MountPropagationNone
	env := []envVar{{"POD_NAME", "web-0"}, {"EMPTY", ""}}
	tests := []struct {
		name   string
		mounts []v1.VolumeMount
		opts   ContainerOptions
		want   []*runtimeapi.Mount
	}{
		{
			name:   "plain mount",
			mounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
			want:   []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: testVolumes["data"]}},
		},
		{
			name: "read-only and propagation modes",
			mounts: []v1.VolumeMount{
				{Name: "host", MountPath: "/a", ReadOnly: true},
				{Name: "host", MountPath: "/b", MountPropagation: &hostToContainer},
				{Name: "host", MountPath: "/c", MountPropagation: &bidirectional},
				{Name: "host", MountPath: "/d", MountPropagation: &none},
			},
			want: []*runtimeapi.Mount{
				{ContainerPath: "/a", HostPath: "/srv/shared", Readonly: true},
				{ContainerPath: "/b", HostPath: "/srv/shared", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
				{ContainerPath: "/c", HostPath: "/srv/shared", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
				{ContainerPath: "/d", HostPath: "/srv/shared", Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
			},
		},
		{
			name: "subPath and subPathExpr",
			mounts: []v1.VolumeMount{
				{Name: "host", MountPath: "/conf", SubPath: "etc/app"},
				{Name: "host", MountPath: "/logs", SubPathExpr: "logs/$(POD_NAME)"},
				{Name: "host", MountPath: "/clean", SubPath: "a/./b//c/"},
				{Name: "host", MountPath: "/dots", SubPath: "..hidden/x..y"},
			},
			want: []*runtimeapi.Mount{
				{ContainerPath: "/conf", HostPath: "/srv/shared/etc/app"},
				{ContainerPath: "/logs", HostPath: "/srv/shared/logs/web-0"},
				{ContainerPath: "/clean", HostPath: "/srv/shared/a/b/c"},
				{ContainerPath: "/dots", HostPath: "/srv/shared/..hidden/x..y"},
			},
		},
		{
			name:   "hosts file and termination message are appended",
			mounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
			opts:   ContainerOptions{HostsFilePath: "/pods/u1/etc-hosts", TerminationMessageHostPath: "/pods/u1/containers/app/abc"},
			want: []*runtimeapi.Mount{
				{ContainerPath: "/data", HostPath: testVolumes["data"]},
				{ContainerPath: "/etc/hosts", HostPath: "/pods/u1/etc-hosts"},
				{ContainerPath: "/dev/termination-log", HostPath: "/pods/u1/containers/app/abc"},
			},
		},
		{
			name:   "container's own /etc/hosts wins",
			mounts: []v1.VolumeMount{{Name: "host", MountPath: "/etc/hosts", SubPath: "hosts"}},
			opts:   ContainerOptions{HostsFilePath: "/pods/u1/etc-hosts"},
			want:   []*runtimeapi.Mount{{ContainerPath: "/etc/hosts", HostPath: "/srv/shared/hosts"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", VolumeMounts: tt.mounts, TerminationMessagePath: "/dev/termination-log"}
			opts := tt.opts
			opts.VolumePaths = testVolumes
			got, err := makeMounts(&v1.Pod{}, c, opts, env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("mounts =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

func TestAPIVolumesMountReadOnly(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
		{Name: "kube-api-access-x", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}}}
	paths := map[string]string{"cfg": "/v/cfg", "sec": "/v/sec", "info": "/v/info", "kube-api-access-x": "/v/sa", "data": "/v/data"}
	c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{
		{Name: "cfg", MountPath: "/etc/app"},
		{Name: "sec", MountPath: "/etc/secret", ReadOnly: true},
		{Name: "info", MountPath: "/etc/podinfo"},
		{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
		{Name: "cfg", MountPath: "/etc/one", SubPath: "one.conf"},
		{Name: "data", MountPath: "/data"},
	}}
	got, err := makeMounts(pod, c, ContainerOptions{VolumePaths: paths}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if want := i != 5; m.Readonly != want {
			t.Errorf("mount %s: readonly = %v, want %v", m.ContainerPath, m.Readonly, want)
		}
	}
}

func TestMakeMountsErrors(t *testing.T) {
	env := []envVar{{"POD_NAME", "web-0"}, {"EMPTY", ""}, {"UP", ".."}}
	enabled := v1.RecursiveReadOnlyEnabled
	bogus := v1.MountPropagationMode("Sideways")
	tests := []struct {
		name    string
		mount   v1.VolumeMount
		wantErr string
	}{
		{"missing volume", v1.VolumeMount{Name: "nope", MountPath: "/x"}, `volumeMounts[0] (nope): volume "nope" is not among the pod's prepared volumes`},
		{"volume without a path", v1.VolumeMount{Name: "empty", MountPath: "/x"}, `volume "empty" is not among`},
		{"absolute subPath", v1.VolumeMount{Name: "host", MountPath: "/x", SubPath: "/etc"}, `subPath "/etc": must not be an absolute path`},
		{"climbing subPath", v1.VolumeMount{Name: "host", MountPath: "/x", SubPath: "a/../../etc"}, `subPath "a/../../etc": must not contain '..'`},
		{"bare dot-dot", v1.VolumeMount{Name: "host", MountPath: "/x", SubPath: ".."}, `must not contain '..'`},
		{"climbing through an expansion", v1.VolumeMount{Name: "host", MountPath: "/x", SubPathExpr: "$(UP)/etc"}, `subPathExpr "../etc": must not contain '..'`},
		{"expansion of an empty variable", v1.VolumeMount{Name: "host", MountPath: "/x", SubPathExpr: "logs/$(EMPTY)$(UNSET)"}, `missing value for EMPTY, UNSET`},
		{"relative mount path", v1.VolumeMount{Name: "host", MountPath: "data"}, `mountPath "data" must be absolute`},
		{"bad propagation", v1.VolumeMount{Name: "host", MountPath: "/x", MountPropagation: &bogus}, `invalid mode "Sideways"`},
		{"recursive read-only on a writable mount", v1.VolumeMount{Name: "host", MountPath: "/x", RecursiveReadOnly: &enabled}, `requires readOnly: true`},
		{"recursive read-only unsupported", v1.VolumeMount{Name: "host", MountPath: "/x", ReadOnly: true, RecursiveReadOnly: &enabled}, `runtime does not support`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{tt.mount}}
			_, err := makeMounts(&v1.Pod{}, c, ContainerOptions{VolumePaths: testVolumes}, env)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestRecursiveReadOnly(t *testing.T) {
	ifPossible, enabled, disabled := v1.RecursiveReadOnlyIfPossible, v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyDisabled
	for _, tt := range []struct {
		mode     *v1.RecursiveReadOnlyMode
		supports bool
		want     bool
	}{
		{nil, true, false},
		{&disabled, true, false},
		{&ifPossible, false, false},
		{&ifPossible, true, true},
		{&enabled, true, true},
	} {
		got, err := recursiveReadOnly(&v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: tt.mode}, tt.supports)
		if err != nil || got != tt.want {
			t.Errorf("mode %v supports %v: got %v, %v; want %v", tt.mode, tt.supports, got, err, tt.want)
		}
	}
}

func TestSubPaths(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metaWith("web-0", "prod", "u1", nil, nil)}
	pod.Spec.Containers = []v1.Container{{
		Name: "app",
		Env:  []v1.EnvVar{fieldEnv("POD_NAME", "metadata.name")},
		VolumeMounts: []v1.VolumeMount{
			{Name: "data", MountPath: "/data"},
			{Name: "host", MountPath: "/logs", SubPathExpr: "logs/$(POD_NAME)"},
			{Name: "data", MountPath: "/cfg", SubPath: "cfg/"},
		},
	}}
	got, err := SubPaths(pod, &pod.Spec.Containers[0], ContainerOptions{VolumePaths: testVolumes})
	if err != nil {
		t.Fatal(err)
	}
	want := []SubPath{
		{MountIndex: 1, Volume: "host", VolumePath: "/srv/shared", Path: "logs/web-0"},
		{MountIndex: 2, Volume: "data", VolumePath: testVolumes["data"], Path: "cfg"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SubPaths = %+v, want %+v", got, want)
	}

	pod.Spec.Containers[0].VolumeMounts[2].SubPath = "../x"
	if _, err := SubPaths(pod, &pod.Spec.Containers[0], ContainerOptions{VolumePaths: testVolumes}); err == nil ||
		!strings.Contains(err.Error(), `container "app": volumeMounts[2] (data): subPath "../x"`) {
		t.Errorf("err = %v", err)
	}
}
