package kuberuntime

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testEnvObjects() *EnvObjects {
	return &EnvObjects{
		ConfigMaps: map[string]*v1.ConfigMap{
			"settings": {
				ObjectMeta: metav1.ObjectMeta{Name: "settings"},
				Data:       map[string]string{"MODE": "fast", "LEVEL": "3", "bad=key": "x"},
				BinaryData: map[string][]byte{"BLOB": {1, 2}},
			},
		},
		Secrets: map[string]*v1.Secret{
			"creds": {ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"PASSWORD": []byte("s3cret")}},
		},
	}
}

func cmKeyEnv(name, cm, key string, optional bool) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: cm}, Key: key, Optional: &optional}}}
}

func secretKeyEnv(name, secret, key string, optional bool) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: secret}, Key: key, Optional: &optional}}}
}

func cmFrom(name, prefix string, optional bool) v1.EnvFromSource {
	return v1.EnvFromSource{Prefix: prefix, ConfigMapRef: &v1.ConfigMapEnvSource{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: &optional}}
}

func secretFrom(name, prefix string, optional bool) v1.EnvFromSource {
	return v1.EnvFromSource{Prefix: prefix, SecretRef: &v1.SecretEnvSource{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: &optional}}
}

func TestMakeEnvironmentWithObjects(t *testing.T) {
	tests := []struct {
		name string
		c    v1.Container
		want []envVar
	}{
		{
			name: "envFrom keys sorted, with prefix; a key that cannot be a name is skipped; binaryData is not env",
			c:    v1.Container{EnvFrom: []v1.EnvFromSource{cmFrom("settings", "APP_", false), secretFrom("creds", "", false)}},
			want: []envVar{{"APP_LEVEL", "3"}, {"APP_MODE", "fast"}, {"PASSWORD", "s3cret"}},
		},
		{
			name: "env replaces envFrom and can expand its values",
			c: v1.Container{
				EnvFrom: []v1.EnvFromSource{cmFrom("settings", "", false)},
				Env:     []v1.EnvVar{{Name: "MODE", Value: "slow"}, {Name: "DESC", Value: "$(MODE)-$(LEVEL)"}},
			},
			want: []envVar{{"LEVEL", "3"}, {"MODE", "slow"}, {"DESC", "slow-3"}},
		},
		{
			name: "key references",
			c:    v1.Container{Env: []v1.EnvVar{cmKeyEnv("M", "settings", "MODE", false), secretKeyEnv("P", "creds", "PASSWORD", false)}},
			want: []envVar{{"M", "fast"}, {"P", "s3cret"}},
		},
		{
			name: "optional references to nothing set nothing",
			c: v1.Container{
				EnvFrom: []v1.EnvFromSource{cmFrom("absent", "", true), secretFrom("absent", "", true)},
				Env: []v1.EnvVar{
					{Name: "KEEP", Value: "1"},
					cmKeyEnv("A", "absent", "MODE", true), cmKeyEnv("B", "settings", "NOPE", true),
					secretKeyEnv("C", "absent", "X", true), secretKeyEnv("D", "creds", "NOPE", true),
				},
			},
			want: []envVar{{"KEEP", "1"}},
		},
		{
			name: "an optional miss keeps what envFrom set",
			c: v1.Container{
				EnvFrom: []v1.EnvFromSource{cmFrom("settings", "", false)},
				Env:     []v1.EnvVar{cmKeyEnv("MODE", "settings", "NOPE", true)},
			},
			want: []envVar{{"LEVEL", "3"}, {"MODE", "fast"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := downwardPod()
			c := tt.c
			c.Name = "app"
			got, err := makeEnvironment(pod, &c, ContainerOptions{EnvObjects: testEnvObjects()})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("env = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMakeEnvironmentObjectErrors(t *testing.T) {
	tests := []struct {
		name    string
		c       v1.Container
		wantErr string
	}{
		{"required configMap missing", v1.Container{EnvFrom: []v1.EnvFromSource{cmFrom("absent", "", false)}},
			`envFrom[0].configMapRef: configmap "absent" not found`},
		{"required secret missing", v1.Container{EnvFrom: []v1.EnvFromSource{cmFrom("settings", "", false), secretFrom("absent", "", false)}},
			`envFrom[1].secretRef: secret "absent" not found`},
		{"required key's configMap missing", v1.Container{Env: []v1.EnvVar{cmKeyEnv("X", "absent", "k", false)}},
			`env[0] "X": valueFrom.configMapKeyRef: configmap "absent" not found`},
		{"required key missing", v1.Container{Env: []v1.EnvVar{cmKeyEnv("X", "settings", "k", false)}},
			`couldn't find key k in ConfigMap prod/settings`},
		{"binaryData is not env", v1.Container{Env: []v1.EnvVar{cmKeyEnv("X", "settings", "BLOB", false)}},
			`couldn't find key BLOB in ConfigMap prod/settings`},
		{"required secret key missing", v1.Container{Env: []v1.EnvVar{secretKeyEnv("X", "creds", "k", false)}},
			`env[0] "X": valueFrom.secretKeyRef: couldn't find key k in Secret prod/creds`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.Name = "app"
			_, err := makeEnvironment(downwardPod(), &c, ContainerOptions{EnvObjects: testEnvObjects()})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestEnvReferences(t *testing.T) {
	c := &v1.Container{
		EnvFrom: []v1.EnvFromSource{cmFrom("a", "", false), secretFrom("s1", "", false), cmFrom("b", "", false)},
		Env: []v1.EnvVar{
			{Name: "PLAIN", Value: "x"}, fieldEnv("F", "metadata.name"),
			cmKeyEnv("X", "a", "k", false), cmKeyEnv("Y", "c", "k", false),
			secretKeyEnv("Z", "s2", "k", false), secretKeyEnv("W", "s1", "k", false),
		},
	}
	cms, secrets := EnvReferences(c)
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(cms, want) {
		t.Errorf("configMaps = %v, want %v", cms, want)
	}
	if want := []string{"s1", "s2"}; !reflect.DeepEqual(secrets, want) {
		t.Errorf("secrets = %v, want %v", secrets, want)
	}
	if cms, secrets := EnvReferences(&v1.Container{}); cms != nil || secrets != nil {
		t.Errorf("no references: %v, %v", cms, secrets)
	}
}
