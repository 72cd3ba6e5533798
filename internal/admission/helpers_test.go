package admission

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/v1helper"
)

// res builds a resource list from name, quantity pairs; an empty quantity
// leaves the name out, so that builders can take optional amounts.
func res(pairs ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			l[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
	}
	return l
}

type podOpt func(*v1.Pod)

// newPod is a BestEffort pod of one container until options say otherwise.
// Its UID is its name, so that explanations can be checked by name.
func newPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// guaranteed sets cpu and memory requests equal to the limits.
func guaranteed(cpu, memory string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = res("cpu", cpu, "memory", memory)
		p.Spec.Containers[0].Resources.Limits = res("cpu", cpu, "memory", memory)
	}
}

// burstable sets requests without limits.
func burstable(cpu, memory string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = res("cpu", cpu, "memory", memory)
	}
}

// requests sets the first container's requests, of any resources.
func requests(pairs ...string) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = res(pairs...) }
}

// draBacked maps the container's requests of resources to the pod's
// extended resource claim, as the scheduler does when a DRA driver serves
// them.
func draBacked(container string, resources ...string) podOpt {
	return func(p *v1.Pod) {
		st := &v1.PodExtendedResourceClaimStatus{ResourceClaimName: p.Name + "-extended-resources"}
		for i, r := range resources {
			st.RequestMappings = append(st.RequestMappings, v1.ContainerExtendedResourceRequest{
				ContainerName: container, ResourceName: r, RequestName: "container-0-request-" + strconv.Itoa(i)})
		}
		p.Status.ExtendedResourceClaimStatus = st
	}
}

// container adds an app container with requests.
func container(pairs ...string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name:      "c" + strconv.Itoa(len(p.Spec.Containers)),
			Resources: v1.ResourceRequirements{Requests: res(pairs...)},
		})
	}
}

// initContainer adds an init container with requests.
func initContainer(pairs ...string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
			Name:      "init" + strconv.Itoa(len(p.Spec.InitContainers)),
			Resources: v1.ResourceRequirements{Requests: res(pairs...)},
		})
	}
}

func overhead(pairs ...string) podOpt {
	return func(p *v1.Pod) { p.Spec.Overhead = res(pairs...) }
}

func priority(v int32) podOpt {
	return func(p *v1.Pod) { p.Spec.Priority = &v }
}

func annotate(key, value string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[key] = value
	}
}

// static marks a pod read from the manifest directory.
func static() podOpt { return annotate(v1helper.ConfigSourceAnnotationKey, v1helper.FileSource) }

func mirror() podOpt { return annotate(v1helper.ConfigMirrorAnnotationKey, "hash") }

// withHostPort adds a host port to the first container; an empty protocol is
// left empty, as the API server's defaulting would not have run on it.
func withHostPort(port int32, protocol v1.Protocol, ip string) podOpt {
	return func(p *v1.Pod) {
		c := &p.Spec.Containers[0]
		c.Ports = append(c.Ports, v1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: protocol, HostIP: ip})
	}
}

// sidecarPort adds an init container binding a host port, restartable
// (a sidecar) or not.
func sidecarPort(port int32, restartable bool) podOpt {
	return func(p *v1.Pod) {
		c := v1.Container{Name: "side", Ports: []v1.ContainerPort{{ContainerPort: port, HostPort: port}}}
		if restartable {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func nodeSelector(key, value string) podOpt {
	return func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{key: value} }
}

func withNodeName(name string) podOpt {
	return func(p *v1.Pod) { p.Spec.NodeName = name }
}

// newNode is node "berth" with the allocatable of pairs and the labels.
func newNode(labels map[string]string, pairs ...string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "berth", Labels: labels},
		Status:     v1.NodeStatus{Allocatable: res(pairs...), Capacity: res(pairs...)},
	}
}

func infos(pods ...*v1.Pod) []*PodInfo {
	out := make([]*PodInfo, len(pods))
	for i, p := range pods {
		out[i] = NewPodInfo(p)
	}
	return out
}

func victimNames(p *Preemption) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, v := range p.Victims {
		out = append(out, v.Pod)
	}
	return out
}

func candidateNames(p *Preemption) []string {
	var out []string
	for _, c := range p.Candidates {
		out = append(out, c.Pod)
	}
	return out
}

// ns qualifies names as the explanation does.
func ns(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "default/"+n)
	}
	return out
}

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)
