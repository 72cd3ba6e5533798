package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// res builds a ResourceList from name/quantity pairs: res("cpu", "1", "memory", "1Gi").
func res(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
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
