package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func res(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestQOSClass(t *testing.T) {
	req := func(r, l v1.ResourceList) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: r, Limits: l}
	}
	guaranteed := req(res("cpu", "500m", "memory", "64Mi"), res("cpu", "0.5", "memory", "64Mi"))
	tests := []struct {
		name  string
		apps  []v1.ResourceRequirements
		inits []v1.ResourceRequirements
		pod   *v1.ResourceRequirements
		want  v1.PodQOSClass
	}{
		{"nothing", []v1.ResourceRequirements{{}}, nil, nil, v1.PodQOSBestEffort},
		{"only zero quantities", []v1.ResourceRequirements{req(res("cpu", "0"), res("memory", "0"))}, nil, nil, v1.PodQOSBestEffort},
		{"only other resources", []v1.ResourceRequirements{req(res("ephemeral-storage", "1Gi"), res("example.com/gpu", "1"))}, nil, nil, v1.PodQOSBestEffort},
		{"requests equal limits", []v1.ResourceRequirements{guaranteed, guaranteed}, nil, nil, v1.PodQOSGuaranteed},
		{"requests below limits", []v1.ResourceRequirements{req(res("cpu", "250m", "memory", "64Mi"), res("cpu", "500m", "memory", "64Mi"))}, nil, nil, v1.PodQOSBurstable},
		{"memory limit missing", []v1.ResourceRequirements{req(res("cpu", "1"), res("cpu", "1"))}, nil, nil, v1.PodQOSBurstable},
		{"only requests", []v1.ResourceRequirements{req(res("memory", "1Gi"), nil)}, nil, nil, v1.PodQOSBurstable},
		{"one container best-effort", []v1.ResourceRequirements{guaranteed, {}}, nil, nil, v1.PodQOSBurstable},
		{"init container counts", []v1.ResourceRequirements{guaranteed}, []v1.ResourceRequirements{req(res("cpu", "1"), nil)}, nil, v1.PodQOSBurstable},
		{"init container guaranteed too", []v1.ResourceRequirements{guaranteed}, []v1.ResourceRequirements{guaranteed}, nil, v1.PodQOSGuaranteed},
		{"pod-level guaranteed", []v1.ResourceRequirements{{}}, nil, &guaranteed, v1.PodQOSGuaranteed},
		{"pod-level burstable", []v1.ResourceRequirements{guaranteed}, nil, &v1.ResourceRequirements{Requests: res("cpu", "1")}, v1.PodQOSBurstable},
		{"pod-level without cpu or memory is ignored", []v1.ResourceRequirements{guaranteed}, nil, &v1.ResourceRequirements{Limits: res("hugepages-2Mi", "2Mi")}, v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Resources: tt.pod}}
			for i, r := range tt.apps {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
			}
			for i, r := range tt.inits {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: string(rune('i' + i)), Resources: r})
			}
			if got := qosClass(pod); got != tt.want {
				t.Errorf("qosClass = %s, want %s", got, tt.want)
			}
		})
	}
}
