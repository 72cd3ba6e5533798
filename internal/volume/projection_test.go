package volume

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func fp(data string, mode int32) FileProjection {
	return FileProjection{Data: []byte(data), Mode: mode}
}

func TestConfigMapPayload(t *testing.T) {
	cm := &v1.ConfigMap{
		Data:       map[string]string{"app.conf": "a=1", "log.conf": "debug"},
		BinaryData: map[string][]byte{"logo.png": []byte("PNG")},
	}
	tests := []struct {
		name     string
		items    []v1.KeyToPath
		optional bool
		want     map[string]FileProjection
		wantErr  string
	}{
		{name: "every key, data and binaryData, default mode",
			want: map[string]FileProjection{"app.conf": fp("a=1", 0o644), "log.conf": fp("debug", 0o644), "logo.png": fp("PNG", 0o644)}},
		{name: "items: paths and modes",
			items: []v1.KeyToPath{{Key: "app.conf", Path: "etc/app.conf", Mode: ptr.To[int32](0o600)}, {Key: "logo.png", Path: "logo"}},
			want:  map[string]FileProjection{"etc/app.conf": fp("a=1", 0o600), "logo": fp("PNG", 0o644)}},
		{name: "a missing item key is an error",
			items: []v1.KeyToPath{{Key: "absent", Path: "x"}}, wantErr: "configmap references non-existent config key: absent"},
		{name: "unless optional",
			items: []v1.KeyToPath{{Key: "absent", Path: "x"}, {Key: "log.conf", Path: "log"}}, optional: true,
			want: map[string]FileProjection{"log": fp("debug", 0o644)}},
	}
	for _, tt := range tests {
		got, err := configMapPayload(tt.items, cm, 0o644, tt.optional)
		checkPayload(t, tt.name, got, err, tt.want, tt.wantErr)
	}
}

func TestSecretPayload(t *testing.T) {
	s := &v1.Secret{Data: map[string][]byte{"user": []byte("admin"), "pass": []byte("pw")}}
	tests := []struct {
		name     string
		items    []v1.KeyToPath
		optional bool
		want     map[string]FileProjection
		wantErr  string
	}{
		{name: "every key", want: map[string]FileProjection{"user": fp("admin", 0o400), "pass": fp("pw", 0o400)}},
		{name: "items", items: []v1.KeyToPath{{Key: "pass", Path: "db/password", Mode: ptr.To[int32](0o440)}},
			want: map[string]FileProjection{"db/password": fp("pw", 0o440)}},
		{name: "missing key", items: []v1.KeyToPath{{Key: "token", Path: "t"}}, wantErr: "references non-existent secret key: token"},
		{name: "missing optional key", items: []v1.KeyToPath{{Key: "token", Path: "t"}}, optional: true, want: map[string]FileProjection{}},
	}
	for _, tt := range tests {
		got, err := secretPayload(tt.items, s, 0o400, tt.optional)
		checkPayload(t, tt.name, got, err, tt.want, tt.wantErr)
	}
}

func TestDownwardAPIPayload(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u1",
			Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	field := func(path, fieldPath string, mode *int32) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath}, Mode: mode}
	}
	res := func(path, container, name, divisor string) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &v1.ResourceFieldSelector{
			ContainerName: container, Resource: name, Divisor: resource.MustParse(divisor)}}
	}
	got, err := downwardAPIPayload([]v1.DownwardAPIVolumeFile{
		field("namespace", "metadata.namespace", nil),
		field("labels", "metadata.labels", ptr.To[int32](0o600)),
		field("./meta//name", "metadata.name", nil),
		res("mem_limit", "app", "limits.memory", "1Mi"),
		res("cpu_limit", "app", "limits.cpu", "1m"),
	}, pod, 0o644, alloc)
	checkPayload(t, "fields and resources", got, err, map[string]FileProjection{
		"namespace": fp("prod", 0o644),
		"labels":    fp("app=\"web\"\ntier=\"front\"", 0o600),
		"meta/name": fp("web", 0o644),
		"mem_limit": fp("64", 0o644),
		"cpu_limit": fp("2000", 0o644),
	}, "")

	_, err = downwardAPIPayload([]v1.DownwardAPIVolumeFile{
		field("node", "spec.nodeName", nil), res("x", "ghost", "limits.cpu", "1"), field("ok", "metadata.uid", nil),
	}, pod, 0o644, alloc)
	for _, want := range []string{`node: unsupported fieldPath "spec.nodeName"`, `x: container "ghost"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
}

func checkPayload(t *testing.T, name string, got map[string]FileProjection, err error, want map[string]FileProjection, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: err = %v, want %q", name, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", name, got, want)
	}
}
