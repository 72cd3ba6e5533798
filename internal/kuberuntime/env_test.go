package kuberuntime

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func fieldEnv(name, path string) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func resourceEnv(name, container, res, divisor string) v1.EnvVar {
	sel := &v1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		sel.Divisor = resource.MustParse(divisor)
	}
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{ResourceFieldRef: sel}}
}

func downwardPod() *v1.Pod {
	grace := int64(45)
	return &v1.Pod{
		ObjectMeta: metaWith("web", "prod", "uid-1",
			map[string]string{"app": "web", "tier": "front"},
			map[string]string{"example.com/owner": "team-a", "note": "say \"hi\""}),
		Spec: v1.PodSpec{
			NodeName:                      "node-a",
			ServiceAccountName:            "builder",
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "app",
				Resources: reqs(res("cpu", "250m", "memory", "64Mi", "ephemeral-storage", "1Gi"),
					res("cpu", "1500m", "memory", "128Mi")),
			}, {
				Name:      "side",
				Resources: reqs(res("memory", "32Mi"), res("memory", "32Mi")),
			}},
		},
	}
}

func TestMakeEnvironment(t *testing.T) {
	opts := ContainerOptions{
		PodIP: "10.0.0.5", PodIPs: []string{"10.0.0.5", "fd00::5"},
		HostIP: "192.168.1.10", HostIPs: []string{"192.168.1.10", "fd01::10"},
		NodeAllocatable: res("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi"),
	}
	tests := []struct {
		name string
		env  []v1.EnvVar
		opts *ContainerOptions
		want map[string]string
	}{
		{
			name: "literal and references to earlier variables",
			env: []v1.EnvVar{
				{Name: "A", Value: "a"},
				{Name: "B", Value: "$(A)-b"},
				{Name: "C", Value: "$(D)"}, // D is declared later: left as is
				{Name: "D", Value: "d"},
				{Name: "E", Value: "$$(A)"},
				{Name: "F", Value: "$(UNSET)"},
				{Name: "EMPTY"},
			},
			want: map[string]string{"A": "a", "B": "a-b", "C": "$(D)", "D": "d", "E": "$(A)", "F": "$(UNSET)", "EMPTY": ""},
		},
		{
			name: "redeclared variable keeps its place and takes the last value",
			env:  []v1.EnvVar{{Name: "X", Value: "1"}, {Name: "Y", Value: "$(X)"}, {Name: "X", Value: "2"}},
			want: map[string]string{"X": "2", "Y": "1"},
		},
		{
			name: "downward API fields",
			env: []v1.EnvVar{
				fieldEnv("NAME", "metadata.name"),
				fieldEnv("NS", "metadata.namespace"),
				fieldEnv("UID", "metadata.uid"),
				fieldEnv("APP", "metadata.labels['app']"),
				fieldEnv("MISSING_LABEL", "metadata.labels['nope']"),
				fieldEnv("OWNER", "metadata.annotations['example.com/owner']"),
				fieldEnv("NODE", "spec.nodeName"),
				fieldEnv("SA", "spec.serviceAccountName"),
				fieldEnv("GRACE", "spec.terminationGracePeriodSeconds"),
				fieldEnv("POD_IP", "status.podIP"),
				fieldEnv("POD_IPS", "status.podIPs"),
				fieldEnv("HOST_IP", "status.hostIP"),
				fieldEnv("HOST_IPS", "status.hostIPs"),
				{Name: "REF", Value: "$(NAME).$(NS)"},
			},
			want: map[string]string{
				"NAME": "web", "NS": "prod", "UID": "uid-1", "APP": "web", "MISSING_LABEL": "", "OWNER": "team-a",
				"NODE": "node-a", "SA": "builder", "GRACE": "45",
				"POD_IP": "10.0.0.5", "POD_IPS": "10.0.0.5,fd00::5",
				"HOST_IP": "192.168.1.10", "HOST_IPS": "192.168.1.10,fd01::10",
				"REF": "web.prod",
			},
		},
		{
			name: "whole label and annotation maps",
			env:  []v1.EnvVar{fieldEnv("L", "metadata.labels"), fieldEnv("A", "metadata.annotations")},
			want: map[string]string{
				"L": "app=\"web\"\ntier=\"front\"",
				"A": "example.com/owner=\"team-a\"\nnote=\"say \\\"hi\\\"\"",
			},
		},
		{
			name: "pod IP given only as a list, host IP only as a primary",
			env:  []v1.EnvVar{fieldEnv("P", "status.podIP"), fieldEnv("HS", "status.hostIPs")},
			opts: &ContainerOptions{PodIPs: []string{"10.1.1.1"}, HostIP: "192.168.0.1"},
			want: map[string]string{"P": "10.1.1.1", "HS": "192.168.0.1"},
		},
		{
			name: "resource fields with divisors and rounding up",
			env: []v1.EnvVar{
				resourceEnv("CPU_REQ", "", "requests.cpu", ""),        // 250m -> 1
				resourceEnv("CPU_REQ_M", "", "requests.cpu", "1m"),    // 250
				resourceEnv("CPU_LIM", "", "limits.cpu", ""),          // 1.5 -> 2
				resourceEnv("CPU_LIM_M", "", "limits.cpu", "1m"),      // 1500
				resourceEnv("MEM_REQ", "", "requests.memory", ""),     // bytes
				resourceEnv("MEM_LIM_MI", "", "limits.memory", "1Mi"), // 128
				resourceEnv("MEM_LIM_GI", "", "limits.memory", "1Gi"), // 128Mi -> 1
				resourceEnv("EPH_REQ_MI", "", "requests.ephemeral-storage", "1Mi"),
				resourceEnv("EPH_LIM_GI", "", "limits.ephemeral-storage", "1Gi"), // unset: allocatable 100Gi
				resourceEnv("SIDE_MEM", "side", "limits.memory", "1Mi"),
				resourceEnv("SIDE_CPU_LIM", "side", "limits.cpu", ""), // unset: allocatable 4
				resourceEnv("SIDE_CPU_REQ", "side", "requests.cpu", ""),
				resourceEnv("HUGE", "", "limits.hugepages-2Mi", "1Mi"),
			},
			want: map[string]string{
				"CPU_REQ": "1", "CPU_REQ_M": "250", "CPU_LIM": "2", "CPU_LIM_M": "1500",
				"MEM_REQ": "67108864", "MEM_LIM_MI": "128", "MEM_LIM_GI": "1",
				"EPH_REQ_MI": "1024", "EPH_LIM_GI": "100",
				"SIDE_MEM": "32", "SIDE_CPU_LIM": "4", "SIDE_CPU_REQ": "0", "HUGE": "0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := downwardPod()
			c := &pod.Spec.Containers[0]
			c.Env = tt.env
			o := opts
			if tt.opts != nil {
				o = *tt.opts
			}
			env, err := makeEnvironment(pod, c, o)
			if err != nil {
				t.Fatal(err)
			}
			if got := envMap(env); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("env = %v\nwant  %v", got, tt.want)
			}
		})
	}
}

func TestMakeEnvironmentOrder(t *testing.T) {
	pod := downwardPod()
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "Z", Value: "1"}, {Name: "A", Value: "2"}, {Name: "Z", Value: "3"}, {Name: "M", Value: "4"}}
	env, err := makeEnvironment(pod, c, ContainerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []envVar{{"Z", "3"}, {"A", "2"}, {"M", "4"}}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env = %v, want %v", env, want)
	}
}

func TestMakeEnvironmentErrors(t *testing.T) {
	tests := []struct {
		name    string
		c       v1.Container
		wantErr string
	}{
		{
			name:    "unknown field path",
			c:       v1.Container{Env: []v1.EnvVar{fieldEnv("X", "spec.hostname")}},
			wantErr: `env[0] "X": valueFrom.fieldRef: unsupported fieldPath "spec.hostname"`,
		},
		{
			name:    "subscript on a plain field",
			c:       v1.Container{Env: []v1.EnvVar{fieldEnv("X", "metadata.name['a']")}},
			wantErr: `does not support a subscript`,
		},
		{
			name:    "invalid label key",
			c:       v1.Container{Env: []v1.EnvVar{fieldEnv("X", "metadata.labels['-bad-']")}},
			wantErr: `invalid key subscript`,
		},
		{
			name: "wrong API version",
			c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
				FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}}},
			wantErr: `unsupported apiVersion "v2"`,
		},
		{
			name:    "unknown resource",
			c:       v1.Container{Env: []v1.EnvVar{resourceEnv("X", "", "limits.gpu", "")}},
			wantErr: `env[0] "X": valueFrom.resourceFieldRef: unsupported resource "limits.gpu"`,
		},
		{
			name:    "resource of a container not in the pod",
			c:       v1.Container{Env: []v1.EnvVar{resourceEnv("X", "ghost", "limits.cpu", "")}},
			wantErr: `container "ghost" named in the selector is not in the pod`,
		},
		{
			name: "config map key",
			c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
				ConfigMapKeyRef: &v1.ConfigMapKeySelector{Key: "k"}}}}},
			wantErr: `valueFrom.configMapKeyRef: not supported without an API server`,
		},
		{
			name: "secret key",
			c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
				SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}}}},
			wantErr: `valueFrom.secretKeyRef`,
		},
		{
			name:    "envFrom secret",
			c:       v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{}}}},
			wantErr: `envFrom[0].secretRef: not supported without an API server`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := downwardPod()
			c := tt.c
			c.Name = "app"
			_, err := makeEnvironment(pod, &c, ContainerOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestNodeNameFallback(t *testing.T) {
	pod := downwardPod()
	pod.Spec.NodeName = ""
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{fieldEnv("N", "spec.nodeName"), fieldEnv("G", "spec.terminationGracePeriodSeconds")}
	pod.Spec.TerminationGracePeriodSeconds = nil
	env, err := makeEnvironment(pod, c, ContainerOptions{NodeName: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	if got := envMap(env); got["N"] != "standalone" || got["G"] != "30" {
		t.Errorf("env = %v", got)
	}
}
