package lifecycle

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/admission"
)

func TestUnsupported(t *testing.T) {
	withVolume := func(src v1.VolumeSource) *v1.Pod {
		p := &v1.Pod{}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: src}}
		return p
	}
	// withContainer is a pod whose second container is c.
	withContainer := func(c v1.Container) *v1.Pod {
		c.Name = "second"
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "first"}, c}}}
	}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		wantReason string
		wantText   string
	}{
		{"plain", &v1.Pod{}, "", ""},
		{"token volume", withVolume(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}), "", ""},
		{"nfs", withVolume(v1.VolumeSource{NFS: &v1.NFSVolumeSource{}}),
			reasonUnsupportedVolume, `volume "data": nfs volumes are not supported`},
		// Whether the runtime can mount it is ImageVolumeAdmitHandler's to say.
		{"image volume", withVolume(v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1"}}), "", ""},
		{"iscsi", withVolume(v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{}}), reasonUnsupportedVolume, "this kind of volumes"},
		{"runtime class", &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr.To("gvisor")}},
			reasonUnsupportedRuntimeClass, `runtimeClassName "gvisor"`},
		{"memory emptyDir", withVolume(v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}), "", ""},
		{"huge page emptyDir", withVolume(v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: "HugePages-2Mi"}}), "", ""},
		{"unknown emptyDir medium", withVolume(v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: "Pmem"}}),
			reasonUnsupportedVolume, `volume "data": emptyDir medium "Pmem" volumes are not supported`},
		{"host users", &v1.Pod{Spec: v1.PodSpec{HostUsers: ptr.To(true)}}, "", ""},
		{"stop signal", withContainer(v1.Container{Lifecycle: &v1.Lifecycle{StopSignal: ptr.To(v1.SIGUSR1)}}),
			reasonUnsupportedPodField, "spec.containers[1].lifecycle.stopSignal: is not supported by berth"},
		{"lifecycle without stop signal", withContainer(v1.Container{Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{}}}), "", ""},
		// ContainerRestartRules: berth honours a container's own policy and rules.
		{"restart rules", withContainer(v1.Container{RestartPolicy: ptr.To(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}}), "", ""},
		{"regular container's restart policy", withContainer(v1.Container{RestartPolicy: ptr.To(v1.ContainerRestartPolicyNever)}), "", ""},
		{"sidecar", &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}}}, "", ""},
		{"file key env", withContainer(v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "a"},
			{Name: "B", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{Key: "k"}}}}}),
			reasonUnsupportedPodField, "spec.containers[1].env[1].valueFrom.fileKeyRef: is not supported by berth"},
		{"init container field", &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Lifecycle: &v1.Lifecycle{StopSignal: ptr.To(v1.SIGINT)}}}}},
			reasonUnsupportedPodField, "spec.initContainers[0].lifecycle.stopSignal"},
	} {
		r, bad := unsupported(tc.pod, NodeFeatures{})
		if bad != (tc.wantReason != "") || r.Reason != tc.wantReason || !strings.Contains(r.Message, tc.wantText) {
			t.Errorf("%s: %v %+v, want %q containing %q", tc.name, bad, r, tc.wantReason, tc.wantText)
		}
	}
}

func TestCSIVolumesAdmission(t *testing.T) {
	cluster := NodeFeatures{CSIVolumes: true}
	standalone := NodeFeatures{CSIVolumesWhy: "berth runs standalone: no API server"}
	for _, tc := range []struct {
		name string
		src  v1.VolumeSource
		kind string
	}{
		{"claim", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}, "persistentVolumeClaim"},
		{"generic ephemeral", v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}, "ephemeral"},
		{"inline csi", v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}, "csi"},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "data", VolumeSource: tc.src}}}}
		attrs := &PodAdmitAttributes{Pod: admission.NewPodInfo(pod)}
		if r := PodFeaturesAdmitHandler(cluster).Admit(attrs); !r.Admit {
			t.Errorf("%s: refused on a cluster node: %+v", tc.name, r)
		}
		r := PodFeaturesAdmitHandler(standalone).Admit(attrs)
		want := `volume "data": ` + tc.kind + " volumes cannot be set up: berth runs standalone: no API server"
		if r.Admit || r.Reason != reasonUnsupportedVolume || r.Message != want {
			t.Errorf("%s: standalone: %+v, want %q", tc.name, r, want)
		}
		if r := PodFeaturesAdmitHandler(NodeFeatures{}).Admit(attrs); r.Admit || !strings.Contains(r.Message, "no API server") {
			t.Errorf("%s: no features: %+v", tc.name, r)
		}
	}
}

// TestRefusalOrder checks that a pod for another OS is refused for its OS,
// as by the kubelet, even when it also asks for what berth cannot give
// (a Windows pod typically names a runtime class), and that its sysctls are
// checked before, as the kubelet's sysctl handler comes first.
func TestRefusalOrder(t *testing.T) {
	node := &v1.Node{}
	node.Labels = map[string]string{v1.LabelOSStable: "linux"}
	// Room for any of the pods: only the checks before the fit refuse.
	node.Status.Allocatable = v1.ResourceList{v1.ResourcePods: resource.MustParse("110")}
	sysctls, err := admission.NewSysctlAllowlist([]string{"kernel.shm_rmid_forced"})
	if err != nil {
		t.Fatal(err)
	}
	withSysctl := func(p *v1.Pod, name string) *v1.Pod {
		p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: name, Value: "1"}}}
		return p
	}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		wantReason string
	}{
		{"windows with a runtime class", &v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Windows}, RuntimeClassName: ptr.To("windows-2022")}},
			"PodOSNotSupported"},
		{"windows label and user namespace", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelOSStable: "windows"}},
			Spec: v1.PodSpec{HostUsers: ptr.To(false)}}, "PodOSSelectorNodeLabelDoesNotMatch"},
		{"linux with a user namespace", &v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Linux}, HostUsers: ptr.To(false)}},
			reasonUnsupportedPodField},
		{"linux", &v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Linux}}}, ""},
		{"linux with a safe sysctl", withSysctl(&v1.Pod{}, "kernel.shm_rmid_forced"), ""},
		{"linux with an unsafe sysctl and a user namespace", withSysctl(&v1.Pod{Spec: v1.PodSpec{HostUsers: ptr.To(false)}}, "kernel.msgmax"),
			admission.ReasonSysctlForbidden},
		{"windows label and an unsafe sysctl", withSysctl(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelOSStable: "windows"}}},
			"kernel.msgmax"), admission.ReasonSysctlForbidden},
	} {
		r := NewPipeline(nil, sysctls, NodeFeatures{}).Admit(&PodAdmitAttributes{Pod: admission.NewPodInfo(tc.pod), Node: node})
		if r.Admit != (tc.wantReason == "") || r.Reason != tc.wantReason {
			t.Errorf("%s: %+v, want %q", tc.name, r, tc.wantReason)
		}
	}
}
