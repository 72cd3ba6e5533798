package kuberuntime

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
)

var testHostDNS = &runtimeapi.DNSConfig{
	Servers:  []string{"192.168.1.1", "1.1.1.1"},
	Searches: []string{"lan"},
	Options:  []string{"edns0"},
}

func sandboxPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaWith("web", "prod", "0f1e2d3c", map[string]string{"app": "web"}, map[string]string{"note": "x"}),
		Spec: v1.PodSpec{
			DNSPolicy:       v1.DNSClusterFirst,
			SecurityContext: &v1.PodSecurityContext{},
			Containers: []v1.Container{{
				Name: "app",
				Ports: []v1.ContainerPort{
					{Name: "http", ContainerPort: 8080, HostPort: 80, Protocol: v1.ProtocolTCP},
					{ContainerPort: 9090, Protocol: v1.ProtocolTCP},
				},
			}},
		},
	}
}

func TestSandboxConfigBridge(t *testing.T) {
	pod := sandboxPod()
	cfg, _, err := SandboxConfig(pod, SandboxOptions{PodLogsDir: "/var/log/pods", Attempt: 2}, testHostDNS)
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "0f1e2d3c", Attempt: 2},
		Hostname:     "web",
		LogDirectory: "/var/log/pods/prod_web_0f1e2d3c",
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "1.1.1.1"}, Searches: []string{"lan"}, Options: []string{"edns0"}},
		PortMappings: []*runtimeapi.PortMapping{
			{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: 80},
			{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 9090},
		},
		Labels: map[string]string{
			"app":                       "web",
			container.LabelPodName:      "web",
			container.LabelPodNamespace: "prod",
			container.LabelPodUID:       "0f1e2d3c",
			container.LabelManagedBy:    "true",
		},
		Annotations: map[string]string{"note": "x"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			Sysctls: map[string]string{},
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
					UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE},
				},
				Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
		},
	}
	if !proto.Equal(cfg, want) {
		t.Errorf("SandboxConfig =\n%v\nwant\n%v", cfg, want)
	}
	// The caller's maps and DNS config are not shared with the request.
	cfg.Annotations["note"] = "changed"
	cfg.DnsConfig.Servers[0] = "changed"
	if pod.Annotations["note"] != "x" || testHostDNS.Servers[0] != "192.168.1.1" {
		t.Error("SandboxConfig aliases its inputs")
	}
}

func TestSandboxConfigHostNetwork(t *testing.T) {
	pod := sandboxPod()
	pod.Spec.HostNetwork = true
	pod.Spec.Hostname = "named"
	pod.Spec.HostPID = true
	pod.Spec.SecurityContext = &v1.PodSecurityContext{
		RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(1000)), FSGroup: ptr(int64(2000)),
		Sysctls: []v1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}, {Name: "net/ipv4/conf/eth0.100/rp_filter", Value: "0"}},
	}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "priv", SecurityContext: &v1.SecurityContext{Privileged: ptr(true)}})
	cfg, _, err := SandboxConfig(pod, SandboxOptions{PodLogsDir: "/logs", CgroupParent: "/kubepods/podX"}, testHostDNS)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hostname != "" {
		t.Errorf("host-network sandbox hostname = %q, want empty", cfg.Hostname)
	}
	lc := cfg.Linux
	if lc.CgroupParent != "/kubepods/podX" || !lc.SecurityContext.Privileged ||
		lc.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE ||
		lc.SecurityContext.NamespaceOptions.Pid != runtimeapi.NamespaceMode_NODE ||
		lc.SecurityContext.RunAsUser.GetValue() != 1000 || lc.SecurityContext.RunAsGroup.GetValue() != 1000 ||
		!reflect.DeepEqual(lc.SecurityContext.SupplementalGroups, []int64{2000}) {
		t.Errorf("linux config = %v", lc)
	}
	wantSysctls := map[string]string{"net.core.somaxconn": "1024", "net.ipv4.conf.eth0/100.rp_filter": "0"}
	if !reflect.DeepEqual(lc.Sysctls, wantSysctls) {
		t.Errorf("sysctls = %v, want %v", lc.Sysctls, wantSysctls)
	}
	// ClusterFirst on the host network uses the node's resolver.
	if !reflect.DeepEqual(cfg.DnsConfig.Servers, testHostDNS.Servers) {
		t.Errorf("dns = %v", cfg.DnsConfig)
	}
}

func TestSandboxHostname(t *testing.T) {
	long := strings.Repeat("a", 60) + "-.-bcd"
	tests := []struct {
		name    string
		mutate  func(*v1.Pod)
		opts    SandboxOptions
		want    string
		wantErr string
	}{
		{name: "pod name", want: "web"},
		{name: "spec.hostname", mutate: func(p *v1.Pod) { p.Spec.Hostname = "h1" }, want: "h1"},
		{name: "long name cut to 63 without trailing separators", mutate: func(p *v1.Pod) { p.Name = long }, want: strings.Repeat("a", 60)},
		{name: "override wins", mutate: func(p *v1.Pod) { p.Spec.Hostname = "h1"; p.Spec.HostnameOverride = ptr("db.example.com") }, want: "db.example.com"},
		{name: "subdomain without FQDN", mutate: func(p *v1.Pod) { p.Spec.Subdomain = "svc1" }, opts: SandboxOptions{ClusterDomain: "cluster.local"}, want: "web"},
		{name: "FQDN", mutate: func(p *v1.Pod) { p.Spec.Subdomain = "svc1"; p.Spec.SetHostnameAsFQDN = ptr(true) }, opts: SandboxOptions{ClusterDomain: "cluster.local"},
			want: "web.svc1.prod.svc.cluster.local"},
		{name: "FQDN too long", mutate: func(p *v1.Pod) {
			p.Spec.Hostname = strings.Repeat("h", 40)
			p.Spec.Subdomain = "svc1"
			p.Spec.SetHostnameAsFQDN = ptr(true)
		}, opts: SandboxOptions{ClusterDomain: "cluster.local"}, wantErr: "spec.setHostnameAsFQDN"},
		{name: "invalid hostname", mutate: func(p *v1.Pod) { p.Spec.Hostname = "Not_Valid" }, wantErr: `spec.hostname "Not_Valid" is not a valid DNS label`},
		{name: "invalid override", mutate: func(p *v1.Pod) { p.Spec.HostnameOverride = ptr("-x-") }, wantErr: "spec.hostnameOverride"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := sandboxPod()
			if tt.mutate != nil {
				tt.mutate(pod)
			}
			cfg, _, err := SandboxConfig(pod, tt.opts, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Hostname != tt.want {
				t.Errorf("hostname = %q, want %q", cfg.Hostname, tt.want)
			}
		})
	}
}

func TestPortMappings(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", Ports: []v1.ContainerPort{{ContainerPort: 1, HostPort: 1}}}},
		Containers: []v1.Container{
			{Name: "a", Ports: []v1.ContainerPort{
				{Name: "dns", ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"},
				{Name: "dns-tcp", ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolTCP},
				{Name: "dns", ContainerPort: 54, HostPort: 5454, Protocol: v1.ProtocolUDP}, // duplicate name
				{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP},
				{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}, // exact duplicate
				{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP, HostIP: "::1"},
				{ContainerPort: 9, Protocol: v1.ProtocolSCTP},
			}},
			{Name: "b", Ports: []v1.ContainerPort{{Name: "dns", ContainerPort: 53, HostPort: 53, Protocol: v1.ProtocolUDP}}},
		},
	}}
	want := []*runtimeapi.PortMapping{
		{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"},
		{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 53, HostPort: 5353},
		{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080},
		{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080, HostIp: "::1"},
		{Protocol: runtimeapi.Protocol_SCTP, ContainerPort: 9},
		{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 53},
	}
	got := portMappings(pod)
	if len(got) != len(want) {
		t.Fatalf("got %d mappings %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("mapping %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestSandboxLabelsCannotBeSpoofed(t *testing.T) {
	pod := sandboxPod()
	pod.Labels[container.LabelPodUID] = "someone-else"
	pod.Labels[container.LabelManagedBy] = "false"
	cfg, _, err := SandboxConfig(pod, SandboxOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Labels[container.LabelPodUID] != "0f1e2d3c" || cfg.Labels[container.LabelManagedBy] != "true" {
		t.Errorf("labels = %v", cfg.Labels)
	}
}

func TestSandboxConfigRequiresIdentity(t *testing.T) {
	pod := sandboxPod()
	pod.UID = ""
	if _, _, err := SandboxConfig(pod, SandboxOptions{}, nil); err == nil {
		t.Error("pod without UID accepted")
	}
}
