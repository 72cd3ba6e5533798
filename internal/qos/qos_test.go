package qos

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
			if got := PodQOSClass(pod); got != tt.want {
				t.Errorf("PodQOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

func reqs(requests, limits v1.ResourceList) v1.ResourceRequirements {
	return v1.ResourceRequirements{Requests: requests, Limits: limits}
}

func podWith(init, regular []v1.ResourceRequirements) *v1.Pod {
	pod := &v1.Pod{}
	for i, r := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: "init" + string(rune('a'+i)), Resources: r})
	}
	for i, r := range regular {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "c" + string(rune('a'+i)), Resources: r})
	}
	return pod
}

func TestPodQOSClassMore(t *testing.T) {
	guaranteed := reqs(res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))
	bestEffort := reqs(nil, nil)
	tests := []struct {
		name    string
		init    []v1.ResourceRequirements
		regular []v1.ResourceRequirements
		podRes  *v1.ResourceRequirements
		want    v1.PodQOSClass
	}{
		{name: "no containers", want: v1.PodQOSBestEffort},
		{name: "nothing set", regular: []v1.ResourceRequirements{bestEffort}, want: v1.PodQOSBestEffort},
		{name: "only extended resources", regular: []v1.ResourceRequirements{reqs(res("example.com/gpu", "1"), res("example.com/gpu", "1"))}, want: v1.PodQOSBestEffort},
		{name: "explicit zero", regular: []v1.ResourceRequirements{reqs(res("cpu", "0"), nil)}, want: v1.PodQOSBestEffort},
		{name: "requests equal limits", regular: []v1.ResourceRequirements{guaranteed}, want: v1.PodQOSGuaranteed},
		{name: "equal in different units", regular: []v1.ResourceRequirements{reqs(res("cpu", "1000m", "memory", "1024Mi"), res("cpu", "1", "memory", "1Gi"))}, want: v1.PodQOSGuaranteed},
		{name: "guaranteed plus extended", regular: []v1.ResourceRequirements{reqs(res("cpu", "1", "memory", "1Gi", "example.com/gpu", "1"), res("cpu", "1", "memory", "1Gi", "example.com/gpu", "1"))}, want: v1.PodQOSGuaranteed},
		{name: "cpu only", regular: []v1.ResourceRequirements{reqs(res("cpu", "1"), res("cpu", "1"))}, want: v1.PodQOSBurstable},
		{name: "memory only", regular: []v1.ResourceRequirements{reqs(res("memory", "1Gi"), res("memory", "1Gi"))}, want: v1.PodQOSBurstable},
		{name: "request below limit", regular: []v1.ResourceRequirements{reqs(res("cpu", "500m", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))}, want: v1.PodQOSBurstable},
		{name: "request only", regular: []v1.ResourceRequirements{reqs(res("memory", "64Mi"), nil)}, want: v1.PodQOSBurstable},
		{name: "guaranteed and besteffort mixed", regular: []v1.ResourceRequirements{guaranteed, bestEffort}, want: v1.PodQOSBurstable},
		{name: "two guaranteed", regular: []v1.ResourceRequirements{guaranteed, guaranteed}, want: v1.PodQOSGuaranteed},
		{name: "besteffort init, guaranteed app", init: []v1.ResourceRequirements{bestEffort}, regular: []v1.ResourceRequirements{guaranteed}, want: v1.PodQOSBurstable},
		{name: "guaranteed init and app", init: []v1.ResourceRequirements{guaranteed}, regular: []v1.ResourceRequirements{guaranteed}, want: v1.PodQOSGuaranteed},
		{name: "burstable init", init: []v1.ResourceRequirements{reqs(res("cpu", "1"), nil)}, regular: []v1.ResourceRequirements{bestEffort}, want: v1.PodQOSBurstable},
		{name: "pod-level guaranteed wins over containers", regular: []v1.ResourceRequirements{bestEffort}, podRes: &guaranteed, want: v1.PodQOSGuaranteed},
		{name: "pod-level burstable", regular: []v1.ResourceRequirements{guaranteed}, podRes: &v1.ResourceRequirements{Limits: res("memory", "2Gi")}, want: v1.PodQOSBurstable},
		{name: "pod-level without cpu or memory: the containers decide", regular: []v1.ResourceRequirements{guaranteed}, podRes: &v1.ResourceRequirements{}, want: v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podWith(tt.init, tt.regular)
			pod.Spec.Resources = tt.podRes
			if got := PodQOSClass(pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPodQOSClassIgnoresStatus(t *testing.T) {
	pod := podWith(nil, []v1.ResourceRequirements{{}})
	pod.Status.QOSClass = v1.PodQOSGuaranteed
	if got := PodQOSClass(pod); got != v1.PodQOSBestEffort {
		t.Errorf("QOSClass = %s, want BestEffort (computed from the spec)", got)
	}
}
