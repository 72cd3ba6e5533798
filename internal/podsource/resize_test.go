package podsource

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResizeOnly(t *testing.T) {
	base := func() *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "img",
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("10Mi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("20Mi")}}}}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*v1.Pod)
		want   bool
	}{
		{name: "nothing changed", change: func(*v1.Pod) {}, want: false},
		{name: "cpu request", change: func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("150m") }, want: true},
		{name: "memory limit and a new generation", change: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse("30Mi")
			p.Generation, p.ResourceVersion = 3, "3"
		}, want: true},
		{name: "image too", change: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("150m")
			p.Spec.Containers[0].Image = "other"
		}, want: false},
		{name: "another resource", change: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, want: false},
		{name: "QoS class changes", change: func(p *v1.Pod) {
			r := &p.Spec.Containers[0].Resources
			r.Requests[v1.ResourceCPU], r.Requests[v1.ResourceMemory] = r.Limits[v1.ResourceCPU], r.Limits[v1.ResourceMemory]
		}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := base()
			tc.change(want)
			if got := ResizeOnly(base(), want); got != tc.want {
				t.Errorf("ResizeOnly = %v, want %v", got, tc.want)
			}
		})
	}
}
