package kuberuntime

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testServiceEnv is the start of what envvars.FromServices makes of the
// master service and a "settings-api" service.
func testServiceEnv() []v1.EnvVar {
	return []v1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "443"},
		{Name: "SETTINGS_API_SERVICE_HOST", Value: "10.0.0.7"},
		{Name: "LEVEL", Value: "from-service"},
	}
}

func TestMakeEnvironmentWithServices(t *testing.T) {
	tests := []struct {
		name    string
		c       v1.Container
		service []v1.EnvVar
		want    []envVar
	}{
		{
			name:    "service variables alone",
			service: testServiceEnv(),
			want: []envVar{
				{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"},
				{"SETTINGS_API_SERVICE_HOST", "10.0.0.7"}, {"LEVEL", "from-service"},
			},
		},
		{
			name: "the container's come first, replace service variables, and may refer to them",
			c: v1.Container{Env: []v1.EnvVar{
				{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
				{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"},
				{Name: "AFTER", Value: "$(KUBERNETES_SERVICE_PORT)"},
			}},
			service: testServiceEnv(),
			want: []envVar{
				// A reference before the redeclaration sees the service's
				// value, one after it the container's.
				{"API", "https://10.0.0.1:443"}, {"KUBERNETES_SERVICE_PORT", "6443"}, {"AFTER", "6443"},
				{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"SETTINGS_API_SERVICE_HOST", "10.0.0.7"},
				{"LEVEL", "from-service"},
			},
		},
		{
			name:    "envFrom replaces service variables too",
			c:       v1.Container{EnvFrom: []v1.EnvFromSource{cmFrom("settings", "", false)}},
			service: testServiceEnv(),
			want: []envVar{
				{"LEVEL", "3"}, {"MODE", "fast"},
				{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"},
				{"SETTINGS_API_SERVICE_HOST", "10.0.0.7"},
			},
		},
		{
			name: "an optional reference to nothing leaves the service variable",
			c: v1.Container{Env: []v1.EnvVar{
				cmKeyEnv("KUBERNETES_SERVICE_HOST", "absent", "k", true),
			}},
			service: testServiceEnv()[:1],
			want:    []envVar{{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}},
		},
		{
			name: "a later duplicate service variable wins, in the first one's place",
			service: []v1.EnvVar{
				{Name: "A_PORT", Value: "tcp://10.0.0.2:80"}, {Name: "B", Value: "b"}, {Name: "A_PORT", Value: "tcp://10.0.0.3:80"},
			},
			want: []envVar{{"A_PORT", "tcp://10.0.0.3:80"}, {"B", "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"}}
			got, err := makeEnvironment(pod, &tt.c, ContainerOptions{EnvObjects: testEnvObjects(), ServiceEnv: tt.service})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("env =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

// The container's command and args expand service variables, as the
// kubelet expands them against the whole environment.
func TestContainerConfigServiceEnv(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metaWith("p", "prod", "uid-1", nil, nil)}
	c := &v1.Container{
		Name: "app", Image: "app:1",
		Command: []string{"client", "--server=https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
		Args:    []string{"$(SETTINGS_API_SERVICE_HOST)"},
	}
	cfg, err := ContainerConfig(pod, c, ContainerOptions{ServiceEnv: testServiceEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"client", "--server=https://10.0.0.1:443"}; !reflect.DeepEqual(cfg.Command, want) {
		t.Errorf("command = %q, want %q", cfg.Command, want)
	}
	if want := []string{"10.0.0.7"}; !reflect.DeepEqual(cfg.Args, want) {
		t.Errorf("args = %q, want %q", cfg.Args, want)
	}
	if len(cfg.Envs) != 4 || cfg.Envs[0].Key != "KUBERNETES_SERVICE_HOST" || string(cfg.Envs[0].Value) != "10.0.0.1" {
		t.Errorf("envs = %v", cfg.Envs)
	}
}
