package kuberuntime

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNamespaceOptions(t *testing.T) {
	tests := []struct {
		name          string
		spec          v1.PodSpec
		net, pid, ipc runtimeapi.NamespaceMode
	}{
		{"bridge", v1.PodSpec{}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD},
		{"host network", v1.PodSpec{HostNetwork: true}, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD},
		{"host pid", v1.PodSpec{HostPID: true}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_POD},
		{"shared pid", v1.PodSpec{ShareProcessNamespace: ptr(true)}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD},
		{"shared pid off", v1.PodSpec{ShareProcessNamespace: ptr(false)}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD},
		{"host ipc", v1.PodSpec{HostIPC: true}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_NODE},
		{"all host", v1.PodSpec{HostNetwork: true, HostPID: true, HostIPC: true, ShareProcessNamespace: ptr(true)},
			runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := namespaceOptions(&v1.Pod{Spec: tt.spec}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ns.Network != tt.net || ns.Pid != tt.pid || ns.Ipc != tt.ipc || ns.UsernsOptions.GetMode() != runtimeapi.NamespaceMode_NODE {
				t.Errorf("got net=%v pid=%v ipc=%v userns=%v", ns.Network, ns.Pid, ns.Ipc, ns.UsernsOptions)
			}
		})
	}
	if _, err := namespaceOptions(&v1.Pod{Spec: v1.PodSpec{HostUsers: ptr(false)}}, nil); err == nil {
		t.Error("hostUsers: false accepted without mappings")
	}
}

func securityPod(psc *v1.PodSecurityContext, csc *v1.SecurityContext) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaWith("p", "ns", "u", nil, nil),
		Spec: v1.PodSpec{
			SecurityContext: psc,
			Containers:      []v1.Container{{Name: "app", SecurityContext: csc}},
		},
	}
}

func TestContainerSecurityContext(t *testing.T) {
	defaultNS := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
		UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE},
	}
	unconfined := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	unmasked := v1.UnmaskedProcMount
	strict := v1.SupplementalGroupsPolicyStrict
	tests := []struct {
		name string
		psc  *v1.PodSecurityContext
		csc  *v1.SecurityContext
		opts ContainerOptions
		want *runtimeapi.LinuxContainerSecurityContext
	}{
		{
			name: "defaults",
			psc:  &v1.PodSecurityContext{},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(),
				Seccomp: unconfined,
			},
		},
		{
			name: "seccomp default and image user",
			opts: ContainerOptions{SeccompDefault: true, ImageUID: ptr(int64(1000))},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(),
				Seccomp: runtimeDefault, RunAsUser: &runtimeapi.Int64Value{Value: 1000},
			},
		},
		{
			name: "non-numeric image user",
			opts: ContainerOptions{ImageUser: "nobody"},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(),
				Seccomp: unconfined, RunAsUsername: "nobody",
			},
		},
		{
			name: "pod-level user, groups and seccomp; container overrides the user",
			psc: &v1.PodSecurityContext{
				RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000)), FSGroup: ptr(int64(3000)),
				SupplementalGroups: []int64{4000, 5000}, SupplementalGroupsPolicy: &strict,
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
				SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1"},
			},
			csc:  &v1.SecurityContext{RunAsUser: ptr(int64(1001))},
			opts: ContainerOptions{ImageUID: ptr(int64(0))},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(),
				Seccomp: runtimeDefault, RunAsUser: &runtimeapi.Int64Value{Value: 1001}, RunAsGroup: &runtimeapi.Int64Value{Value: 2000},
				SupplementalGroups: []int64{3000, 4000, 5000}, SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict,
				SelinuxOptions: &runtimeapi.SELinuxOption{Level: "s0:c1"},
			},
		},
		{
			name: "capabilities, read-only root, no privilege escalation, localhost seccomp",
			csc: &v1.SecurityContext{
				Capabilities:             &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN", "SYS_TIME"}, Drop: []v1.Capability{"ALL"}},
				ReadOnlyRootFilesystem:   ptr(true),
				AllowPrivilegeEscalation: ptr(false),
				SeccompProfile:           &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("profiles/audit.json")},
				AppArmorProfile:          &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault},
			},
			opts: ContainerOptions{SeccompProfileRoot: "/var/lib/berth/seccomp"},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(),
				Capabilities:   &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN", "SYS_TIME"}, DropCapabilities: []string{"ALL"}},
				ReadonlyRootfs: true, NoNewPrivs: true,
				Seccomp:         &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/berth/seccomp/profiles/audit.json"},
				Apparmor:        runtimeDefault,
				ApparmorProfile: "runtime/default",
			},
		},
		{
			name: "explicit allowPrivilegeEscalation true",
			csc:  &v1.SecurityContext{AllowPrivilegeEscalation: ptr(true)},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(), Seccomp: unconfined,
			},
		},
		{
			name: "container seccomp beats pod seccomp",
			psc:  &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			csc:  &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}},
			opts: ContainerOptions{SeccompDefault: true},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(), Seccomp: unconfined,
			},
		},
		{
			name: "privileged: no masked paths",
			csc:  &v1.SecurityContext{Privileged: ptr(true)},
			want: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: defaultNS, Privileged: true, Seccomp: unconfined},
		},
		{
			name: "unmasked proc",
			csc:  &v1.SecurityContext{ProcMount: &unmasked},
			want: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: defaultNS, Seccomp: unconfined},
		},
		{
			name: "pod apparmor localhost",
			psc:  &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("k8s-deny-write")}},
			want: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: defaultNS, MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths(), Seccomp: unconfined,
				Apparmor:        &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"},
				ApparmorProfile: "localhost/k8s-deny-write",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := securityPod(tt.psc, tt.csc)
			got, err := containerSecurityContext(pod, &pod.Spec.Containers[0], tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("security context =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

func TestContainerSecurityContextErrors(t *testing.T) {
	bogus := v1.SupplementalGroupsPolicy("Mix")
	tests := []struct {
		name    string
		psc     *v1.PodSecurityContext
		csc     *v1.SecurityContext
		opts    ContainerOptions
		wantErr string
	}{
		{"runAsNonRoot with user 0", &v1.PodSecurityContext{RunAsNonRoot: ptr(true)}, &v1.SecurityContext{RunAsUser: ptr(int64(0))}, ContainerOptions{}, `container's runAsUser breaks non-root policy (pod: "p_ns(u)", container: app)`},
		{"runAsNonRoot with root image", nil, &v1.SecurityContext{RunAsNonRoot: ptr(true)}, ContainerOptions{ImageUID: ptr(int64(0))}, `container has runAsNonRoot and image will run as root (pod: "p_ns(u)", container: app)`},
		{"runAsNonRoot with named image user", &v1.PodSecurityContext{RunAsNonRoot: ptr(true)}, nil, ContainerOptions{ImageUser: "app"}, "image has non-numeric user (app), cannot verify user is non-root"},
		{"localhost seccomp without profile", nil, &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}, ContainerOptions{}, "securityContext.seccompProfile: localhostProfile must be set"},
		{"unknown seccomp type", &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: "Mystery"}}, nil, ContainerOptions{}, `spec.securityContext.seccompProfile: unsupported type "Mystery"`},
		{"localhost apparmor without profile", nil, &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost}}, ContainerOptions{}, "securityContext.appArmorProfile: localhostProfile must be set"},
		{"unknown supplemental groups policy", &v1.PodSecurityContext{SupplementalGroupsPolicy: &bogus}, nil, ContainerOptions{}, `supplementalGroupsPolicy: unsupported value "Mix"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := securityPod(tt.psc, tt.csc)
			_, err := containerSecurityContext(pod, &pod.Spec.Containers[0], tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunAsNonRootAccepted(t *testing.T) {
	for _, opts := range []ContainerOptions{{ImageUID: ptr(int64(65534))}, {}} {
		pod := securityPod(&v1.PodSecurityContext{RunAsNonRoot: ptr(true)}, nil)
		if _, err := containerSecurityContext(pod, &pod.Spec.Containers[0], opts); err != nil {
			t.Errorf("opts %+v: %v", opts, err)
		}
	}
	pod := securityPod(&v1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(10))}, nil)
	if _, err := containerSecurityContext(pod, &pod.Spec.Containers[0], ContainerOptions{ImageUID: ptr(int64(0))}); err != nil {
		t.Errorf("explicit non-root user over a root image: %v", err)
	}
}

func TestDefaultPathListsAreFresh(t *testing.T) {
	a := defaultMaskedPaths()
	a[0] = "changed"
	if defaultMaskedPaths()[0] == "changed" {
		t.Error("defaultMaskedPaths shares its backing array")
	}
}

// An ephemeral container with a target joins the target's PID namespace;
// everything else of the pod's namespaces stays.
func TestContainerSecurityContextTarget(t *testing.T) {
	pod := securityPod(nil, nil)
	sc, err := containerSecurityContext(pod, &pod.Spec.Containers[0], ContainerOptions{TargetContainerID: "c0ffee"})
	if err != nil {
		t.Fatal(err)
	}
	ns := sc.NamespaceOptions
	if ns.Pid != runtimeapi.NamespaceMode_TARGET || ns.TargetId != "c0ffee" || ns.Network != runtimeapi.NamespaceMode_POD {
		t.Errorf("namespaces = %+v, want pid TARGET c0ffee in the pod's network", ns)
	}
	sc, err = containerSecurityContext(pod, &pod.Spec.Containers[0], ContainerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.NamespaceOptions.Pid != runtimeapi.NamespaceMode_CONTAINER || sc.NamespaceOptions.TargetId != "" {
		t.Errorf("no target: namespaces = %+v", sc.NamespaceOptions)
	}
}
