package admission

import (
	goruntime "runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func withOS(name v1.OSName) podOpt {
	return func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: name} }
}

func withLabel(key, value string) podOpt {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[key] = value
	}
}

func groupsPolicy(policy v1.SupplementalGroupsPolicy) podOpt {
	return func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &policy}
	}
}

func TestEarlyRejection(t *testing.T) {
	linux := newNode(map[string]string{v1.LabelOSStable: "linux"}, "cpu", "2", "pods", "110")
	unlabelled := newNode(nil, "cpu", "2", "pods", "110")
	strictNode := newNode(nil, "cpu", "2", "pods", "110")
	strictNode.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}
	const strictMsg = "SupplementalGroupsPolicy=Strict is not supported in this node"
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		node       *v1.Node
		wantReason string
		wantMsg    string
	}{
		{"no OS at all", newPod("p"), linux, "", ""},
		{"spec.os linux", newPod("p", withOS(v1.Linux)), linux, "", ""},
		{"spec.os windows", newPod("p", withOS(v1.Windows)), linux, ReasonPodOSNotSupported,
			"Failed to admit pod as the OS field doesn't match node OS"},
		{"spec.os of no known OS", newPod("p", withOS("plan9")), linux, ReasonPodOSNotSupported,
			"Failed to admit pod as the OS field doesn't match node OS"},
		{"os label linux", newPod("p", withLabel(v1.LabelOSStable, "linux")), linux, "", ""},
		{"os label windows", newPod("p", withLabel(v1.LabelOSStable, "windows")), linux,
			ReasonPodOSSelectorNodeLabelDoesNotMatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		// The node's OS counts, not its label: the kubelet replaces a
		// missing or wrong label with the OS it runs on.
		{"os label linux, node unlabelled", newPod("p", withLabel(v1.LabelOSStable, "linux")), unlabelled, "", ""},
		{"os label windows, node unlabelled", newPod("p", withLabel(v1.LabelOSStable, "windows")), unlabelled,
			ReasonPodOSSelectorNodeLabelDoesNotMatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		// The label is checked before the field.
		{"both wrong", newPod("p", withLabel(v1.LabelOSStable, "windows"), withOS(v1.Windows)), linux,
			ReasonPodOSSelectorNodeLabelDoesNotMatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		// A nodeSelector is NodeAffinity's business, not this check's.
		{"os nodeSelector", newPod("p", nodeSelector(v1.LabelOSStable, "windows")), linux, "", ""},
		{"Merge groups", newPod("p", groupsPolicy(v1.SupplementalGroupsPolicyMerge)), linux, "", ""},
		{"Strict groups, node without features", newPod("p", groupsPolicy(v1.SupplementalGroupsPolicyStrict)), linux,
			ReasonSupplementalGroupsPolicyNotSupported, strictMsg},
		{"Strict groups, node that supports them", newPod("p", groupsPolicy(v1.SupplementalGroupsPolicyStrict)), strictNode, "", ""},
	} {
		r, bad := earlyRejection(tc.pod, tc.node, "linux")
		if bad != (tc.wantReason != "") || r.Reason != tc.wantReason || r.Message != tc.wantMsg || r.Admit {
			t.Errorf("%s: %v %+v, want %q %q", tc.name, bad, r, tc.wantReason, tc.wantMsg)
		}
	}
}

// TestAdmitRejectsOSBeforeAnything checks that a pod of another OS is
// refused with the OS reason even when it would not fit either, and that a
// critical one preempts nobody for it.
func TestAdmitRejectsOSBeforeAnything(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("the node OS is linux here")
	}
	node := newNode(map[string]string{v1.LabelOSStable: "linux"}, "cpu", "1", "memory", "1Gi", "pods", "110")
	active := infos(newPod("bu", burstable("1", "512Mi")))
	for _, pod := range []*v1.Pod{
		newPod("win", withOS(v1.Windows), guaranteed("1", "1Gi")),
		newPod("win-static", withOS(v1.Windows), guaranteed("1", "1Gi"), static()),
	} {
		r := Admit(NewPodInfo(pod), Node{Node: node, Active: active})
		if r.Admit || r.Reason != ReasonPodOSNotSupported || r.Preemption != nil || len(r.Insufficient) != 0 || r.NoPreemption == "" {
			t.Errorf("%s: %+v, want rejected with %s before resources, no preemption", pod.Name, r, ReasonPodOSNotSupported)
		}
	}
	r := Admit(NewPodInfo(newPod("lin", withOS(v1.Linux))), Node{Node: node})
	if !r.Admit {
		t.Errorf("a linux pod: %+v, want admitted", r)
	}
}
