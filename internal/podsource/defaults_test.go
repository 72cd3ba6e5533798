package podsource

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestSetDefaultsPodSpec(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}}}
	SetDefaults(pod)
	want := v1.PodSpec{
		Containers: []v1.Container{{
			Name: "c", Image: "busybox:1.36",
			ImagePullPolicy:          v1.PullIfNotPresent,
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: v1.TerminationMessageReadFile,
		}},
		RestartPolicy:                 v1.RestartPolicyAlways,
		DNSPolicy:                     v1.DNSClusterFirst,
		SchedulerName:                 "default-scheduler",
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		SecurityContext:               &v1.PodSecurityContext{},
		EnableServiceLinks:            ptr.To(true),
		Priority:                      ptr.To[int32](0),
		PreemptionPolicy:              ptr.To(v1.PreemptLowerPriority),
	}
	if !equality.Semantic.DeepEqual(want, pod.Spec) {
		t.Errorf("SetDefaults (-want +got):\n%s", diff.Diff(want, pod.Spec))
	}
}

func TestSetDefaultsKeepsValues(t *testing.T) {
	spec := v1.PodSpec{
		RestartPolicy:                 v1.RestartPolicyNever,
		DNSPolicy:                     v1.DNSDefault,
		SchedulerName:                 "mine",
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		SecurityContext:               &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
		EnableServiceLinks:            ptr.To(false),
		Containers: []v1.Container{{
			Name: "c", Image: "busybox", ImagePullPolicy: v1.PullNever,
			TerminationMessagePath: "/tmp/msg", TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
		}},
	}
	pod := &v1.Pod{Spec: *spec.DeepCopy()}
	SetDefaults(pod)
	spec.Priority, spec.PreemptionPolicy = ptr.To[int32](0), ptr.To(v1.PreemptLowerPriority)
	if !equality.Semantic.DeepEqual(spec, pod.Spec) {
		t.Errorf("SetDefaults changed set values (-want +got):\n%s", diff.Diff(spec, pod.Spec))
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  v1.PullPolicy
	}{
		{"busybox", v1.PullAlways},
		{"busybox:latest", v1.PullAlways},
		{"registry.example.com:5000/team/app", v1.PullAlways},
		{"registry.example.com:5000/team/app:1.2", v1.PullIfNotPresent},
		{"busybox:1.36", v1.PullIfNotPresent},
		{"busybox@sha256:" + sha, v1.PullIfNotPresent},
		{"busybox:1.36@sha256:" + sha, v1.PullIfNotPresent},
		{"busybox:latest@sha256:" + sha, v1.PullAlways},
		{"127.0.0.1:5000/busybox", v1.PullAlways},
		{"Not A Reference", v1.PullIfNotPresent},
		{"", v1.PullIfNotPresent},
	} {
		if got := defaultPullPolicy(tc.image); got != tc.want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", tc.image, got, tc.want)
		}
	}
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestSetDefaultsContainer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hostNetwork bool
		in, want    v1.Container
	}{{
		name: "ports get TCP",
		in:   v1.Container{Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}}},
		want: v1.Container{Ports: []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}}},
	}, {
		name:        "host network ports become host ports",
		hostNetwork: true,
		in:          v1.Container{Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 81, HostPort: 81}}},
		want:        v1.Container{Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: v1.ProtocolTCP}, {ContainerPort: 81, HostPort: 81, Protocol: v1.ProtocolTCP}}},
	}, {
		name: "env sources",
		in: v1.Container{Env: []v1.EnvVar{
			{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		}},
		want: v1.Container{Env: []v1.EnvVar{
			{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
			{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1")}}},
			{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		}},
	}, {
		name: "requests default to limits per resource",
		in: v1.Container{Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
		}},
		want: v1.Container{Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")},
		}},
	}, {
		name: "requests from limits when none are set",
		in:   v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}}},
		want: v1.Container{Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{"example.com/gpu": resource.MustParse("1")},
			Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("1")},
		}},
	}, {
		name: "quantities round up to milli",
		in:   v1.Container{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.0001")}}},
		want: v1.Container{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m")}}},
	}, {
		name: "probes",
		in: v1.Container{
			LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}}, PeriodSeconds: 5},
			StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}, FailureThreshold: 30},
		},
		want: v1.Container{
			LivenessProbe: &v1.Probe{
				ProbeHandler:   v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080), Scheme: v1.URISchemeHTTP}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
			},
			ReadinessProbe: &v1.Probe{
				ProbeHandler:   v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Service: ptr.To("")}},
				TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3,
			},
			StartupProbe: &v1.Probe{
				ProbeHandler:   v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 30,
			},
		},
	}, {
		name: "lifecycle httpGet",
		in:   v1.Container{Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/stop", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTPS}}, PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}}},
		want: v1.Container{Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/stop", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTPS}}, PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP}}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			base := v1.Container{Name: "c", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile}
			in, want := tc.in, tc.want
			in.Name, in.Image = base.Name, base.Image
			want.Name, want.Image, want.ImagePullPolicy = base.Name, base.Image, base.ImagePullPolicy
			want.TerminationMessagePath, want.TerminationMessagePolicy = base.TerminationMessagePath, base.TerminationMessagePolicy
			// The same defaults hold for init containers.
			pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: tc.hostNetwork, Containers: []v1.Container{in}, InitContainers: []v1.Container{*in.DeepCopy()}}}
			SetDefaults(pod)
			if !equality.Semantic.DeepEqual(want, pod.Spec.Containers[0]) {
				t.Errorf("container (-want +got):\n%s", diff.Diff(want, pod.Spec.Containers[0]))
			}
			if !equality.Semantic.DeepEqual(want, pod.Spec.InitContainers[0]) {
				t.Errorf("init container (-want +got):\n%s", diff.Diff(want, pod.Spec.InitContainers[0]))
			}
			again := pod.DeepCopy()
			SetDefaults(again)
			if !equality.Semantic.DeepEqual(pod, again) {
				t.Errorf("SetDefaults is not idempotent (-once +twice):\n%s", diff.Diff(pod, again))
			}
		})
	}
}

func TestSetDefaultsVolumes(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch"},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}},
		{Name: "sock", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/run/x.sock", Type: ptr.To(v1.HostPathSocket)}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1"}}},
		{Name: "latest", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools"}}},
		{Name: "never", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools", PullPolicy: v1.PullNever}}},
	}}}
	SetDefaults(pod)
	want := []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log", Type: ptr.To(v1.HostPathUnset)}}},
		{Name: "sock", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/run/x.sock", Type: ptr.To(v1.HostPathSocket)}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1", PullPolicy: v1.PullIfNotPresent}}},
		{Name: "latest", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools", PullPolicy: v1.PullAlways}}},
		{Name: "never", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools", PullPolicy: v1.PullNever}}},
	}
	if !equality.Semantic.DeepEqual(want, pod.Spec.Volumes) {
		t.Errorf("volumes (-want +got):\n%s", diff.Diff(want, pod.Spec.Volumes))
	}
}

func TestSetDefaultsPriority(t *testing.T) {
	for _, tc := range []struct {
		class    string
		priority *int32
		want     *int32
	}{
		{"", nil, ptr.To[int32](0)},
		{SystemNodeCritical, nil, ptr.To[int32](2000001000)},
		{SystemClusterCritical, nil, ptr.To[int32](2000000000)},
		{"high", nil, nil}, // refused by validation
		{SystemNodeCritical, ptr.To[int32](7), ptr.To[int32](7)},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{PriorityClassName: tc.class, Priority: tc.priority}}
		SetDefaults(pod)
		if !equality.Semantic.DeepEqual(tc.want, pod.Spec.Priority) {
			t.Errorf("class %q, priority %v: got %v, want %v", tc.class, ptr.Deref(tc.priority, -1), ptr.Deref(pod.Spec.Priority, -1), ptr.Deref(tc.want, -1))
		}
	}
}
