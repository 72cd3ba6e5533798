package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestConditions(t *testing.T) {
	gated := func(p *v1.Pod, types ...v1.PodConditionType) *v1.Pod {
		for _, typ := range types {
			p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, v1.PodReadinessGate{ConditionType: typ})
		}
		return p
	}
	ready := func(s v1.ContainerStatus) v1.ContainerStatus { s.Ready = true; return s }
	tests := []struct {
		name     string
		pod      *v1.Pod
		statuses []v1.ContainerStatus
		phase    v1.PodPhase
		want     map[v1.PodConditionType]v1.PodCondition // Type filled in by the test
	}{
		{
			name:     "all ready",
			pod:      newPod(v1.RestartPolicyAlways, []string{"i"}, "a"),
			statuses: []v1.ContainerStatus{ready(terminated("i", 0)), ready(running("a"))},
			phase:    v1.PodRunning,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionTrue},
				v1.ContainersReady: {Status: v1.ConditionTrue},
				v1.PodReady:        {Status: v1.ConditionTrue},
			},
		},
		{
			name:     "init containers incomplete",
			pod:      newPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a", "b"),
			statuses: []v1.ContainerStatus{ready(terminated("i1", 0)), running("i2"), waiting("a"), waiting("b")},
			phase:    v1.PodPending,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionFalse, Reason: "ContainersNotInitialized", Message: "containers with incomplete status: [i2]"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [a b]"},
				v1.PodReady:        {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [a b]"},
			},
		},
		{
			name:     "unknown statuses",
			pod:      newPod(v1.RestartPolicyAlways, []string{"i"}, "a", "b"),
			statuses: []v1.ContainerStatus{waiting("b")},
			phase:    v1.PodPending,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionFalse, Reason: "ContainersNotInitialized", Message: "containers with unknown status: [i]"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unknown status: [a], containers with unready status: [b]"},
			},
		},
		{
			name:     "a regular container has run: initialized",
			pod:      newPod(v1.RestartPolicyAlways, []string{"i"}, "a"),
			statuses: []v1.ContainerStatus{waiting("i"), ready(running("a"))},
			phase:    v1.PodRunning,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized: {Status: v1.ConditionTrue},
			},
		},
		{
			name:     "succeeded",
			pod:      newPod(v1.RestartPolicyNever, []string{"i"}, "a"),
			statuses: []v1.ContainerStatus{ready(terminated("i", 0)), terminated("a", 0)},
			phase:    v1.PodSucceeded,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionTrue, Reason: "PodCompleted"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "PodCompleted"},
				v1.PodReady:        {Status: v1.ConditionFalse, Reason: "PodCompleted"},
			},
		},
		{
			name:     "failed, even with a container still ready",
			pod:      newPod(v1.RestartPolicyNever, nil, "a", "b"),
			statuses: []v1.ContainerStatus{ready(running("a")), terminated("b", 1)},
			phase:    v1.PodFailed,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "PodFailed"},
				v1.PodReady:        {Status: v1.ConditionFalse, Reason: "PodFailed"},
			},
		},
		{
			name:     "readiness gates hold Ready back",
			pod:      gated(newPod(v1.RestartPolicyAlways, []string{"i"}, "a"), "example.com/lb", v1.PodInitialized),
			statuses: []v1.ContainerStatus{waiting("i"), ready(running("a"))},
			phase:    v1.PodRunning,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.ContainersReady: {Status: v1.ConditionTrue},
				v1.PodReady: {Status: v1.ConditionFalse, Reason: "ReadinessGatesNotReady",
					Message: `corresponding condition of pod readiness gate "example.com/lb" does not exist.`},
			},
		},
		{
			name:     "readiness gate on a False condition",
			pod:      gated(newPod(v1.RestartPolicyAlways, nil, "a"), "example.com/lb", v1.PodReadyToStartContainers),
			statuses: []v1.ContainerStatus{ready(running("a"))},
			phase:    v1.PodRunning,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.PodReady: {Status: v1.ConditionFalse, Reason: "ReadinessGatesNotReady",
					Message: `corresponding condition of pod readiness gate "example.com/lb" does not exist., ` +
						`the status of pod readiness gate "PodReadyToStartContainers" is not "True", but False`},
			},
		},
		{
			name: "readiness gates met by conditions others set in the API server",
			pod: func() *v1.Pod {
				p := gated(newPod(v1.RestartPolicyAlways, nil, "a"), "example.com/lb", "example.com/dns")
				p.Status.Conditions = []v1.PodCondition{
					{Type: "example.com/lb", Status: v1.ConditionTrue}, {Type: "example.com/dns", Status: v1.ConditionTrue}}
				return p
			}(),
			statuses: []v1.ContainerStatus{ready(running("a"))},
			phase:    v1.PodRunning,
			want:     map[v1.PodConditionType]v1.PodCondition{v1.PodReady: {Status: v1.ConditionTrue}},
		},
		{
			name:     "sidecars count for readiness, by started for initialization",
			pod:      withSidecarPod(newPod(v1.RestartPolicyAlways, nil, "a"), "s"),
			statuses: []v1.ContainerStatus{startedSidecar("s", false), waiting("a")},
			phase:    v1.PodPending,
			want: map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionFalse, Reason: "ContainersNotInitialized", Message: "containers with incomplete status: [s]"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [s a]"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGenerator(input(tt.pod, nil))
			got := g.conditions(tt.statuses, tt.phase)
			for typ, want := range tt.want {
				want.Type = typ
				c := *findCondition(got, typ)
				c.LastTransitionTime = want.LastTransitionTime
				mustEqual(t, string(typ), c, want)
			}
		})
	}
}

func TestConditionOrder(t *testing.T) {
	got := Generate(input(newPod(v1.RestartPolicyAlways, nil, "a"), nil)).Conditions
	want := []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled}
	if len(got) != len(want) {
		t.Fatalf("%d conditions, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Type != want[i] {
			t.Errorf("condition %d is %s, want %s", i, got[i].Type, want[i])
		}
	}
}
