package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/internal/v1helper"
)

// PredicateFailure is a reason the pod cannot run on this node that no
// preemption would cure (the kubelet's PredicateFailureError).
type PredicateFailure struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Error is the kubelet's message.
func (e PredicateFailure) Error() string {
	return fmt.Sprintf("Predicate %s failed: %s", e.Name, e.Description)
}

// The scheduler plugins the kubelet runs at admission, and their reasons.
const (
	nodeAffinity       = "NodeAffinity"
	nodeAffinityReason = "node(s) didn't match Pod's node affinity/selector"
	nodeName           = "NodeName"
	nodeNameReason     = "node(s) didn't match the requested node name"
	nodePorts          = "NodePorts"
	nodePortsReason    = "node(s) didn't have free ports for the requested pod ports"
	taintToleration    = "TaintToleration"
	taintReason        = "node(s) had taints that the pod didn't tolerate"
)

// predicates are the kubelet's non-resource admission checks, in its
// order: the node's labels against the pod's node selector and required
// node affinity, the node's name, and the host ports of the active pods.
// Of the node's taints only NoExecute ones count, as for the kubelet: the
// others keep the scheduler away, not a pod already bound. Static pods are
// not checked against taints at all (the kubelet's generalFilter): nothing
// but the node runs them, so a taint would only leave the node without them.
func predicates(pod *v1.Pod, node *v1.Node, active []*PodInfo) []PredicateFailure {
	var out []PredicateFailure
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok || err != nil {
		out = append(out, PredicateFailure{nodeAffinity, nodeAffinityReason})
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		out = append(out, PredicateFailure{nodeName, nodeNameReason})
	}
	if hostPortsConflict(pod, active) {
		out = append(out, PredicateFailure{nodePorts, nodePortsReason})
	}
	if !v1helper.IsStaticPod(pod) && untoleratedNoExecute(pod, node) {
		out = append(out, PredicateFailure{taintToleration, taintReason})
	}
	return out
}

// hostPort is one port a pod binds on the node.
type hostPort struct {
	ip       string
	protocol v1.Protocol
	port     int32
}

// conflicts reports two bindings of the same port and protocol on the same
// address, or on any address when either listens on all of them ("" or
// 0.0.0.0, as the scheduler reads it).
func (a hostPort) conflicts(b hostPort) bool {
	if a.port != b.port || a.protocol != b.protocol {
		return false
	}
	wildcard := func(ip string) bool { return ip == "" || ip == "0.0.0.0" }
	return a.ip == b.ip || wildcard(a.ip) || wildcard(b.ip)
}

// hostPorts are the host ports of the pod's containers and of its sidecars
// (init containers that keep running), as the scheduler counts them.
func hostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			out = append(out, hostPort{ip: p.HostIP, protocol: proto, port: p.HostPort})
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

func hostPortsConflict(pod *v1.Pod, active []*PodInfo) bool {
	wanted := hostPorts(pod)
	if len(wanted) == 0 {
		return false
	}
	for _, other := range active {
		for _, taken := range hostPorts(other.Pod) {
			for _, w := range wanted {
				if w.conflicts(taken) {
					return true
				}
			}
		}
	}
	return false
}

// untoleratedNoExecute reports a NoExecute taint of the node that the pod
// does not tolerate. The comparison operators (Lt, Gt) are off, as the
// TaintTolerationComparisonOperators gate is by default in Kubernetes 1.36:
// a toleration using them tolerates nothing, as on the kubelet.
func untoleratedNoExecute(pod *v1.Pod, node *v1.Node) bool {
	noExecute := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
	_, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noExecute, false)
	return found
}
