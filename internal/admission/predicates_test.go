package admission

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPredicates(t *testing.T) {
	affinity := PredicateFailure{"NodeAffinity", "node(s) didn't match Pod's node affinity/selector"}
	name := PredicateFailure{"NodeName", "node(s) didn't match the requested node name"}
	ports := PredicateFailure{"NodePorts", "node(s) didn't have free ports for the requested pod ports"}
	requiredZone := func(zone string) podOpt {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
					NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
						{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{zone}},
					}}},
				},
			}}
		}
	}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		active []*v1.Pod
		want   []PredicateFailure
	}{
		{name: "no constraints", pod: newPod("p"), active: []*v1.Pod{newPod("a", withHostPort(80, "", ""))}},
		{name: "nodeSelector matches", pod: newPod("p", nodeSelector("zone", "a"))},
		{name: "nodeSelector mismatch", pod: newPod("p", nodeSelector("zone", "b")), want: []PredicateFailure{affinity}},
		{name: "nodeSelector on a label the node lacks", pod: newPod("p", nodeSelector("gpu", "yes")), want: []PredicateFailure{affinity}},
		{name: "required node affinity matches", pod: newPod("p", requiredZone("a"))},
		{name: "required node affinity mismatch", pod: newPod("p", requiredZone("b")), want: []PredicateFailure{affinity}},
		{name: "nodeName is this node", pod: newPod("p", withNodeName("berth"))},
		{name: "nodeName is another node", pod: newPod("p", withNodeName("other")), want: []PredicateFailure{name}},
		{
			name:   "same port and protocol",
			pod:    newPod("p", withHostPort(80, v1.ProtocolTCP, "")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, ""))},
			want:   []PredicateFailure{ports},
		},
		{
			name:   "no protocol is TCP",
			pod:    newPod("p", withHostPort(80, "", "")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, ""))},
			want:   []PredicateFailure{ports},
		},
		{
			name:   "same port, another protocol",
			pod:    newPod("p", withHostPort(53, v1.ProtocolUDP, "")),
			active: []*v1.Pod{newPod("a", withHostPort(53, v1.ProtocolTCP, ""))},
		},
		{
			name:   "another port",
			pod:    newPod("p", withHostPort(8080, v1.ProtocolTCP, "")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, ""))},
		},
		{
			name:   "a specific address against all addresses",
			pod:    newPod("p", withHostPort(80, v1.ProtocolTCP, "10.0.0.1")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, "0.0.0.0"))},
			want:   []PredicateFailure{ports},
		},
		{
			// The scheduler reads only "" and 0.0.0.0 as all addresses.
			name:   "the IPv6 any address is an address like another",
			pod:    newPod("p", withHostPort(80, v1.ProtocolTCP, "::")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, "10.0.0.1"))},
		},
		{
			name:   "all addresses against a specific one",
			pod:    newPod("p", withHostPort(80, v1.ProtocolTCP, "")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, "10.0.0.1"))},
			want:   []PredicateFailure{ports},
		},
		{
			name:   "the same specific address",
			pod:    newPod("p", withHostPort(80, v1.ProtocolTCP, "10.0.0.1")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, "10.0.0.1"))},
			want:   []PredicateFailure{ports},
		},
		{
			name:   "two specific addresses",
			pod:    newPod("p", withHostPort(80, v1.ProtocolTCP, "10.0.0.1")),
			active: []*v1.Pod{newPod("a", withHostPort(80, v1.ProtocolTCP, "10.0.0.2"))},
		},
		{
			name:   "an active pod's sidecar holds the port",
			pod:    newPod("p", withHostPort(9100, "", "")),
			active: []*v1.Pod{newPod("a", sidecarPort(9100, true))},
			want:   []PredicateFailure{ports},
		},
		{
			name:   "the new pod's sidecar wants a taken port",
			pod:    newPod("p", sidecarPort(9100, true)),
			active: []*v1.Pod{newPod("a", withHostPort(9100, "", ""))},
			want:   []PredicateFailure{ports},
		},
		{
			name:   "a plain init container's port is released before the app starts",
			pod:    newPod("p", withHostPort(9100, "", "")),
			active: []*v1.Pod{newPod("a", sidecarPort(9100, false))},
		},
		{
			name:   "container port without a host port",
			pod:    newPod("p", withHostPort(80, "", ""), func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 0 }),
			active: []*v1.Pod{newPod("a", withHostPort(80, "", ""))},
		},
		{
			name:   "every predicate, in the kubelet's order",
			pod:    newPod("p", nodeSelector("zone", "b"), withNodeName("other"), withHostPort(80, "", "")),
			active: []*v1.Pod{newPod("a", withHostPort(80, "", ""))},
			want:   []PredicateFailure{affinity, name, ports},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newNode(map[string]string{"zone": "a"}, "pods", "110")
			if got := predicates(tc.pod, node, infos(tc.active...)); !slices.Equal(got, tc.want) {
				t.Errorf("predicates = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPredicateFailureMessage(t *testing.T) {
	got := PredicateFailure{"NodePorts", "node(s) didn't have free ports for the requested pod ports"}.Error()
	if want := "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// Of the node's taints the kubelet checks only NoExecute ones; the others
// keep the scheduler away, not a pod already bound.
func TestPredicatesNoExecuteTaints(t *testing.T) {
	node := newNode(nil, "pods", "110")
	node.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "edge", Effect: v1.TaintEffectNoExecute},
		{Key: "spot", Effect: v1.TaintEffectNoSchedule}}
	untolerated := []PredicateFailure{{"TaintToleration", "node(s) had taints that the pod didn't tolerate"}}
	if got := predicates(newPod("p"), node, nil); !slices.Equal(got, untolerated) {
		t.Errorf("untolerated: %+v", got)
	}
	tolerant := newPod("p", func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "edge"}}
	})
	if got := predicates(tolerant, node, nil); len(got) != 0 {
		t.Errorf("tolerated: %+v", got)
	}
	// A static pod is not checked against taints at all, toleration or not.
	static := newPod("p", func(p *v1.Pod) {
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	})
	if got := predicates(static, node, nil); len(got) != 0 {
		t.Errorf("static pod: %+v", got)
	}
	// Lt and Gt tolerate nothing while their feature gate is off, as it is
	// by default in 1.36.
	node.Spec.Taints = []v1.Taint{{Key: "gen", Value: "5", Effect: v1.TaintEffectNoExecute}}
	compared := newPod("p", func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "gen", Operator: "Gt", Value: "3", Effect: v1.TaintEffectNoExecute}}
	})
	if got := predicates(compared, node, nil); !slices.Equal(got, untolerated) {
		t.Errorf("Gt toleration: %+v", got)
	}
}
