package lifecycle

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/v1helper"
)

// pressure is an eviction manager under pressure or not.
type pressure bool

func (p pressure) Admit(*v1.Pod) (bool, string, string) {
	if p {
		return false, "Evicted", "The node had condition: [DiskPressure]. "
	}
	return true, "", ""
}

// pod is a pod of one container requesting cpu ("" for none), named and
// with the UID name.
func pod(name, cpu string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	}
	return p
}

func node(cpu string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: map[string]string{v1.LabelOSStable: "linux"}}}
	n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourcePods: resource.MustParse("110")}
	return n
}

func infos(pods ...*v1.Pod) []*admission.PodInfo {
	out := make([]*admission.PodInfo, len(pods))
	for i, p := range pods {
		out[i] = admission.NewPodInfo(p)
	}
	return out
}

func TestHandlers(t *testing.T) {
	sysctls, err := admission.NewSysctlAllowlist([]string{"kernel.shm_rmid_forced"})
	if err != nil {
		t.Fatal(err)
	}
	withSysctl := func(p *v1.Pod) *v1.Pod {
		p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
		return p
	}
	elsewhere := pod("elsewhere", "")
	elsewhere.Spec.NodeName = "other"
	windows := pod("windows", "")
	windows.Spec.OS = &v1.PodOS{Name: v1.Windows}
	for _, tc := range []struct {
		name        string
		h           PodAdmitHandler
		pod         *v1.Pod
		others      []*v1.Pod
		wantReason  string // "" = admitted
		wantMessage string
	}{
		{"no pressure", EvictionAdmitHandler(pressure(false)), pod("a", ""), nil, "", ""},
		{"pressure", EvictionAdmitHandler(pressure(true)), pod("a", ""), nil, "Evicted", "The node had condition: [DiskPressure]. "},
		{"no sysctls", SysctlAdmitHandler(sysctls), pod("a", ""), nil, "", ""},
		{"a forbidden sysctl", SysctlAdmitHandler(sysctls), withSysctl(pod("a", "")), nil,
			admission.ReasonSysctlForbidden, `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{"no allowlist", SysctlAdmitHandler(nil), pod("a", ""), nil, "", ""},
		{"the node's OS", PodOSAdmitHandler(), pod("a", ""), nil, "", ""},
		{"another OS", PodOSAdmitHandler(), windows, nil, admission.ReasonPodOSNotSupported,
			"Failed to admit pod as the OS field doesn't match node OS"},
		{"a supported pod", PodFeaturesAdmitHandler(), pod("a", ""), nil, "", ""},
		{"an unsupported field", PodFeaturesAdmitHandler(), &v1.Pod{Spec: v1.PodSpec{HostUsers: ptr.To(false)}}, nil,
			reasonUnsupportedPodField, "spec.hostUsers: false (user namespaces) is not supported by berth: its sandboxes run in the node's user namespace"},
		{"fits", PredicateAdmitHandler(), pod("b", "1"), []*v1.Pod{pod("a", "1")}, "", ""},
		{"out of cpu", PredicateAdmitHandler(), pod("b", "1500m"), []*v1.Pod{pod("a", "1")}, "OutOfcpu",
			"Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{"another node", PredicateAdmitHandler(), elsewhere, nil, "NodeName",
			"Predicate NodeName failed: node(s) didn't match the requested node name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.h.Admit(&PodAdmitAttributes{Pod: admission.NewPodInfo(tc.pod), Node: node("2"), OtherPods: infos(tc.others...)})
			if r.Admit != (tc.wantReason == "") || r.Reason != tc.wantReason || r.Message != tc.wantMessage {
				t.Errorf("got %+v, want %q %q", r, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func TestCriticalPodAdmissionHandler(t *testing.T) {
	critical := func(p *v1.Pod) *v1.Pod {
		p.Spec.Priority = ptr.To(v1helper.SystemCriticalPriority + 1000)
		return p
	}
	static := pod("static", "1500m")
	static.Annotations = map[string]string{v1helper.ConfigSourceAnnotationKey: v1helper.FileSource}
	elsewhere := critical(pod("elsewhere", "1"))
	elsewhere.Spec.NodeName = "other"
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		others      []*v1.Pod
		wantAdmit   bool
		wantVictims []string
		wantErr     bool
		wantReason  string
	}{
		{name: "a critical pod preempts for cpu", pod: critical(pod("crit", "1")),
			others: []*v1.Pod{pod("small", "500m"), pod("big", "1500m")}, wantAdmit: true, wantVictims: []string{"big"}},
		{name: "an ordinary pod preempts nothing", pod: pod("plain", "1"),
			others: []*v1.Pod{pod("big", "1500m")}, wantReason: "OutOfcpu"},
		{name: "a critical pod failing another predicate is rejected for it", pod: elsewhere,
			others: []*v1.Pod{pod("big", "1500m")}, wantReason: "NodeName"},
		{name: "no victims free enough", pod: critical(pod("crit", "1")),
			others: []*v1.Pod{static}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := &PodAdmitAttributes{Pod: admission.NewPodInfo(tc.pod), Node: node("2"), OtherPods: infos(tc.others...)}
			rejected := PredicateAdmitHandler().Admit(attrs)
			if !rejected.Recoverable() {
				t.Fatalf("the predicate handler's %+v is not for the failure handler", rejected)
			}
			r, err := CriticalPodAdmissionHandler().HandleAdmissionFailure(attrs, rejected)
			if (err != nil) != tc.wantErr || r.Admit != tc.wantAdmit || (!tc.wantErr && r.Reason != tc.wantReason) {
				t.Fatalf("got %+v, %v; want admit %v, reason %q, error %v", r, err, tc.wantAdmit, tc.wantReason, tc.wantErr)
			}
			var victims []string
			if r.Preemption != nil {
				for _, v := range r.Preemption.VictimPods() {
					victims = append(victims, v.Pod.Name)
				}
			}
			if len(victims) != len(tc.wantVictims) || (len(victims) > 0 && victims[0] != tc.wantVictims[0]) {
				t.Errorf("victims %v, want %v", victims, tc.wantVictims)
			}
		})
	}
}

// TestNewPipelineOrder checks the order of berth's handlers: the eviction
// manager's first, as in the kubelet, then the sysctls, the pod's OS, what
// berth cannot honour, and last the fit, so that a pod that would be refused
// anyway never preempts.
func TestNewPipelineOrder(t *testing.T) {
	sysctls, err := admission.NewSysctlAllowlist(nil)
	if err != nil {
		t.Fatal(err)
	}
	crit := pod("crit", "2")
	crit.Spec.Priority = ptr.To(v1helper.SystemCriticalPriority + 1000)
	critUnsupported := crit.DeepCopy()
	critUnsupported.Spec.HostUsers = ptr.To(false)
	everything := critUnsupported.DeepCopy()
	everything.Spec.Priority = nil
	everything.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
	for _, tc := range []struct {
		name       string
		pressure   pressure
		pod        *v1.Pod
		wantReason string
		preempts   bool
	}{
		{"pressure first", true, everything, "Evicted", false},
		{"then the sysctls", false, everything, admission.ReasonSysctlForbidden, false},
		{"unsupported before the fit: no preemption", false, critUnsupported, reasonUnsupportedPodField, false},
		{"the fit last, with preemption", false, crit, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewPipeline(tc.pressure, sysctls, RuntimeInfo{}).Admit(&PodAdmitAttributes{Pod: admission.NewPodInfo(tc.pod), Node: node("2"),
				OtherPods: infos(pod("big", "1500m"))})
			if r.Admit != (tc.wantReason == "") || r.Reason != tc.wantReason || (r.Preemption != nil) != tc.preempts {
				t.Errorf("got %+v, want reason %q, preemption %v", r, tc.wantReason, tc.preempts)
			}
		})
	}
}
