package cm

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const gi = int64(1) << 30

// res builds a resource list from name=quantity pairs: res("cpu", "1", "memory", "1Gi").
func res(pairs ...string) v1.ResourceList {
	if len(pairs)%2 != 0 {
		panic("res: odd number of arguments")
	}
	l := v1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

func ctr(name string, requests, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func sidecar(name string, requests, limits v1.ResourceList) v1.Container {
	c := ctr(name, requests, limits)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func podOf(uid string, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: containers},
	}
}

func withInit(p *v1.Pod, inits ...v1.Container) *v1.Pod {
	p.Spec.InitContainers = inits
	return p
}

// describe renders a config for table comparisons; "-" is unset.
func describe(rc ResourceConfig) string {
	field := func(name string, v any) string {
		switch p := v.(type) {
		case *uint64:
			if p != nil {
				return fmt.Sprintf("%s=%d", name, *p)
			}
		case *int64:
			if p != nil {
				return fmt.Sprintf("%s=%d", name, *p)
			}
		}
		return name + "=-"
	}
	return strings.Join([]string{
		field("shares", rc.CPUShares),
		field("quota", rc.CPUQuota),
		field("period", rc.CPUPeriod),
		field("memory", rc.Memory),
		field("pids", rc.PidsLimit),
	}, " ")
}

// want is describe's format for expected values; -1 in a field means unset.
func want(shares, quota, period, memory, pids int64) string {
	f := func(name string, v int64) string {
		if v == unset {
			return name + "=-"
		}
		return fmt.Sprintf("%s=%d", name, v)
	}
	return strings.Join([]string{f("shares", shares), f("quota", quota), f("period", period), f("memory", memory), f("pids", pids)}, " ")
}

// unset marks a field want expects to be nil (-1 is a real value:
// unlimited).
const unset = int64(-1 << 62)
