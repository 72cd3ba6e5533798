package fieldpath

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "uid-1",
			Labels:      map[string]string{"tier": "front", "app": "web"},
			Annotations: map[string]string{"note": `say "hi"`, "Example.com/Owner": "team-a"},
		},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi")}}}},
			Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
			}}},
		},
	}
}

func TestExtractFieldPathAsString(t *testing.T) {
	for _, tt := range []struct {
		path, want, wantErr string
	}{
		{path: "metadata.name", want: "web"},
		{path: "metadata.namespace", want: "prod"},
		{path: "metadata.uid", want: "uid-1"},
		{path: "metadata.labels", want: "app=\"web\"\ntier=\"front\""},
		{path: "metadata.annotations", want: "Example.com/Owner=\"team-a\"\nnote=\"say \\\"hi\\\"\""},
		{path: "metadata.labels['app']", want: "web"},
		{path: "metadata.labels['absent']", want: ""},
		{path: "metadata.annotations['Example.com/Owner']", want: "team-a"},
		{path: "metadata.labels['-bad-']", wantErr: "invalid key subscript"},
		{path: "metadata.name['x']", wantErr: `fieldPath "metadata.name['x']" does not support a subscript`},
		{path: "spec.nodeName", wantErr: `unsupported fieldPath "spec.nodeName"`},
	} {
		got, err := ExtractFieldPathAsString(testPod(), tt.path)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.path, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
}

func TestSplitMaybeSubscriptedPath(t *testing.T) {
	for _, tt := range []struct {
		in, base, key string
		ok            bool
	}{
		{"metadata.annotations['myKey']", "metadata.annotations", "myKey", true},
		{"metadata.annotations['a[b]c']", "metadata.annotations", "a[b]c", true},
		{"metadata.labels['']", "metadata.labels", "", true},
		{"metadata.labels", "metadata.labels", "", false},
		{"['x']", "['x']", "", false},
	} {
		base, key, ok := SplitMaybeSubscriptedPath(tt.in)
		if base != tt.base || key != tt.key || ok != tt.ok {
			t.Errorf("%s = %q, %q, %v", tt.in, base, key, ok)
		}
	}
}

func TestExtractResourceValue(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	pod := testPod()
	app := &pod.Spec.Containers[0]
	sel := func(container, res, divisor string) *v1.ResourceFieldSelector {
		s := &v1.ResourceFieldSelector{ContainerName: container, Resource: res}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return s
	}
	for _, tt := range []struct {
		name    string
		c       *v1.Container
		ref     *v1.ResourceFieldSelector
		want    string
		wantErr string
	}{
		{"own request rounded up", app, sel("", "requests.cpu", ""), "1", ""},
		{"own request in millicores", app, sel("", "requests.cpu", "1m"), "250", ""},
		{"unset limit reads allocatable", app, sel("", "limits.cpu", ""), "4", ""},
		{"memory limit in Mi", app, sel("", "limits.memory", "1Mi"), "128", ""},
		{"volume file: named container", nil, sel("app", "limits.memory", "1Mi"), "128", ""},
		{"volume file: init container", nil, sel("setup", "requests.memory", "1Mi"), "16", ""},
		{"volume file: no container named", nil, sel("", "limits.memory", ""), "", "must name a container"},
		{"unknown container", app, sel("ghost", "limits.cpu", ""), "", `container "ghost" named in the selector is not in the pod`},
		{"unknown resource", app, sel("", "limits.gpu", ""), "", `unsupported resource "limits.gpu"`},
	} {
		got, err := ExtractResourceValue(pod, tt.c, tt.ref, alloc)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestCeilDiv(t *testing.T) {
	for _, tt := range []struct{ a, b, want int64 }{{0, 1, 0}, {1, 1, 1}, {250, 1000, 1}, {1000, 1000, 1}, {1001, 1000, 2}, {5, 0, 0}} {
		if got := ceilDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("ceilDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
