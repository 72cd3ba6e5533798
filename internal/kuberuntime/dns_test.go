package kuberuntime

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's cases (pkg/kubelet/network/dns TestParseResolvConf); the
// options are compared in order, which berth keeps and the kubelet does not.
func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		in       string
		servers  []string
		searches []string
		options  []string
		wantErr  bool
	}{
		{in: ""},
		{in: " "},
		{in: "\n"},
		{in: "\t\n\t"},
		{in: "#comment\n"},
		{in: " #comment\n"},
		{in: "#comment\n#comment"},
		{in: "#comment\nnameserver", wantErr: true},
		{in: "#comment\nnameserver\nsearch", wantErr: true},
		{in: "#comment\nnameserver 1.2.3.4\nsearch", servers: []string{"1.2.3.4"}},
		{in: "nameserver 1.2.3.4", servers: []string{"1.2.3.4"}},
		{in: " nameserver 1.2.3.4", servers: []string{"1.2.3.4"}},
		{in: "\tnameserver 1.2.3.4", servers: []string{"1.2.3.4"}},
		{in: "nameserver\t1.2.3.4", servers: []string{"1.2.3.4"}},
		{in: "nameserver \t 1.2.3.4", servers: []string{"1.2.3.4"}},
		{in: "nameserver 1.2.3.4\nnameserver 5.6.7.8", servers: []string{"1.2.3.4", "5.6.7.8"}},
		{in: "nameserver 1.2.3.4 #comment", servers: []string{"1.2.3.4"}},
		{in: "search "},
		{in: "search ."},
		{in: "search . foo", searches: []string{"foo"}},
		{in: "search foo .", searches: []string{"foo"}},
		{in: "search foo .  bar", searches: []string{"foo", "bar"}},
		{in: "search foo", searches: []string{"foo"}},
		{in: "search foo bar", searches: []string{"foo", "bar"}},
		{in: "search foo. bar", searches: []string{"foo", "bar"}},
		{in: "search foo bar bat\n", searches: []string{"foo", "bar", "bat"}},
		{in: "search foo\nsearch bar", searches: []string{"bar"}},
		{in: "nameserver 1.2.3.4\nsearch foo bar", servers: []string{"1.2.3.4"}, searches: []string{"foo", "bar"}},
		{in: "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar", servers: []string{"1.2.3.4", "5.6.7.8"}, searches: []string{"bar"}},
		{in: "#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment", servers: []string{"1.2.3.4"}, searches: []string{"foo"}},
		{in: "options "},
		{in: "options ndots:5 attempts:2", options: []string{"ndots:5", "attempts:2"}},
		{in: "options ndots:1 ndots:5 attempts:2", options: []string{"ndots:5", "attempts:2"}},
		{in: "options ndots:1 edns0 attempts:2 single-request-reopen", options: []string{"ndots:1", "edns0", "attempts:2", "single-request-reopen"}},
		{in: "options ndots:1\noptions ndots:5 attempts:3", options: []string{"ndots:5", "attempts:3"}},
		{in: "options ndots:1 timeout:3 timeout:1 attempts:3\noptions ndots:5", options: []string{"ndots:5", "timeout:1", "attempts:3"}},
		{in: "options ndots:1 attempts:3\noptions ndots:1 attempts:3 ndots:5", options: []string{"ndots:5", "attempts:3"}},
		{in: "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4",
			servers: []string{"1.2.3.4", "5.6.7.8"}, searches: []string{"bar"}, options: []string{"ndots:5", "attempts:4"}},
		// As the kubelet: "domain" lines are not read.
		{in: "search a.example\ndomain d.example\n", searches: []string{"a.example"}},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			got, err := parseResolvConf([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("%q: no error", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: %v", tt.in, err)
			}
			want := &runtimeapi.DNSConfig{Servers: tt.servers, Searches: tt.searches, Options: tt.options}
			if !proto.Equal(got, want) {
				t.Errorf("%q: got %v, want %v", tt.in, got, want)
			}
		})
	}
}

func TestHostDNSConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 9.9.9.9\nsearch home\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := HostDNSConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, &runtimeapi.DNSConfig{Servers: []string{"9.9.9.9"}, Searches: []string{"home"}}) {
		t.Errorf("got %v", got)
	}
	if cfg, err := HostDNSConfig(""); cfg != nil || err != nil {
		t.Errorf("empty path: %v, %v", cfg, err)
	}
	if _, err := HostDNSConfig(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file accepted")
	}
	if err := os.WriteFile(path, []byte("nameserver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := HostDNSConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("bad file: %v, want an error naming it", err)
	}
}

// The kubelet's TestGetPodDNSCustom and TestGetPodDNS, and the fallbacks.
func TestPodDNSConfig(t *testing.T) {
	host := &runtimeapi.DNSConfig{Servers: []string{"8.8.8.8"}, Searches: []string{"host.domain"}, Options: []string{"ndots:1", "edns0"}}
	custom := &v1.PodDNSConfig{
		Nameservers: []string{"10.0.0.11"},
		Searches:    []string{"my.domain"},
		Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr("3")}, {Name: "debug"}},
	}
	cluster := SandboxOptions{ClusterDNS: []string{"10.0.0.10"}, ClusterDomain: "kubernetes.io"}
	clusterSearch := []string{"testNS.svc.kubernetes.io", "svc.kubernetes.io", "kubernetes.io"}
	tests := []struct {
		name        string
		policy      v1.DNSPolicy
		hostNetwork bool
		dnsConfig   *v1.PodDNSConfig
		host        *runtimeapi.DNSConfig
		opts        SandboxOptions
		want        *runtimeapi.DNSConfig
		wantEvents  []string // reason, on the node or the pod
	}{
		{name: "None without dnsConfig is empty", policy: v1.DNSNone, host: host, opts: cluster,
			want: &runtimeapi.DNSConfig{}},
		{name: "None takes dnsConfig", policy: v1.DNSNone, host: host, opts: cluster,
			dnsConfig: &v1.PodDNSConfig{Nameservers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr("3")}, {Name: "debug"}}},
			want: &runtimeapi.DNSConfig{Servers: []string{"203.0.113.1"}, Searches: []string{"my.domain", "second.domain"}, Options: []string{"ndots:3", "debug"}}},
		{name: "ClusterFirst", policy: v1.DNSClusterFirst, host: host, opts: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(clusterSearch, "host.domain"), Options: []string{"ndots:5"}}},
		{name: "ClusterFirst with dnsConfig", policy: v1.DNSClusterFirst, host: host, opts: cluster, dnsConfig: custom,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10", "10.0.0.11"}, Searches: append(clusterSearch, "host.domain", "my.domain"), Options: []string{"ndots:3", "debug"}}},
		{name: "ClusterFirstWithHostNet with dnsConfig", policy: v1.DNSClusterFirstWithHostNet, hostNetwork: true, host: host, opts: cluster, dnsConfig: custom,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10", "10.0.0.11"}, Searches: append(clusterSearch, "host.domain", "my.domain"), Options: []string{"ndots:3", "debug"}}},
		{name: "ClusterFirstWithHostNet off the host network", policy: v1.DNSClusterFirstWithHostNet, host: host, opts: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(clusterSearch, "host.domain"), Options: []string{"ndots:5"}}},
		{name: "Default with dnsConfig", policy: v1.DNSDefault, host: host, opts: cluster, dnsConfig: custom,
			want: &runtimeapi.DNSConfig{Servers: []string{"8.8.8.8", "10.0.0.11"}, Searches: []string{"host.domain", "my.domain"}, Options: []string{"ndots:3", "edns0", "debug"}}},
		{name: "ClusterFirst on the host network is Default", policy: v1.DNSClusterFirst, hostNetwork: true, host: host, opts: cluster,
			want: proto.Clone(host).(*runtimeapi.DNSConfig)},
		{name: "cluster domain the same as a host search is listed once", policy: v1.DNSClusterFirst, opts: cluster,
			host: &runtimeapi.DNSConfig{Servers: []string{"8.8.8.8"}, Searches: []string{"kubernetes.io", "lan"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(clusterSearch, "lan"), Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without a cluster domain has the host's searches", policy: v1.DNSClusterFirst, host: host,
			opts: SandboxOptions{ClusterDNS: []string{"10.0.0.10"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"host.domain"}, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without a host resolver", policy: v1.DNSClusterFirst, opts: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without cluster DNS falls back to Default", policy: v1.DNSClusterFirst, host: host,
			opts:       SandboxOptions{ClusterDomain: "kubernetes.io"},
			want:       proto.Clone(host).(*runtimeapi.DNSConfig),
			wantEvents: []string{"node MissingClusterDNS", "pod MissingClusterDNS"}},
		{name: "ClusterFirstWithHostNet without cluster DNS falls back to Default", policy: v1.DNSClusterFirstWithHostNet, hostNetwork: true, host: host,
			want:       proto.Clone(host).(*runtimeapi.DNSConfig),
			wantEvents: []string{"node MissingClusterDNS", "pod MissingClusterDNS"}},
		{name: "no cluster DNS and no host resolver: the local one", policy: v1.DNSClusterFirst,
			want:       &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}},
			wantEvents: []string{"node MissingClusterDNS", "pod MissingClusterDNS"}},
		{name: "Default without a host resolver: the local one", policy: v1.DNSDefault, opts: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}},
		{name: "Default without a host resolver, dual-stack node IPs", policy: v1.DNSDefault,
			opts: SandboxOptions{NodeIPs: []string{"192.168.1.2", "fd00::2"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1", "::1"}, Searches: []string{"."}}},
		{name: "an empty host resolver stays empty", policy: v1.DNSDefault, host: &runtimeapi.DNSConfig{},
			want: &runtimeapi.DNSConfig{}},
		{name: "four nameservers are cut to three", policy: v1.DNSDefault,
			host:       &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1", "10.0.0.10", "8.8.8.8", "1.2.3.4"}},
			want:       &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}},
			wantEvents: []string{"pod DNSConfigForming"}},
		{name: "dnsConfig nameservers beyond three are cut", policy: v1.DNSClusterFirst, host: host, opts: cluster,
			dnsConfig:  &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.0.0.1", "9.9.9.9"}},
			want:       &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10", "1.1.1.1", "1.0.0.1"}, Searches: append(clusterSearch, "host.domain"), Options: []string{"ndots:5"}},
			wantEvents: []string{"pod DNSConfigForming"}},
		{name: "an unknown policy counts as ClusterFirst", policy: "Sometimes", host: host, opts: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(clusterSearch, "host.domain"), Options: []string{"ndots:5"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metaWith("test_pod", "testNS", "u1", nil, nil),
				Spec: v1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNetwork, DNSConfig: tt.dnsConfig}}
			var hostCopy *runtimeapi.DNSConfig
			if tt.host != nil {
				hostCopy = proto.Clone(tt.host).(*runtimeapi.DNSConfig)
			}
			got, warnings := podDNSConfig(pod, tt.host, tt.opts)
			if !proto.Equal(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
			var events []string
			for _, w := range warnings {
				on := "pod"
				if w.OnNode {
					on = "node"
				}
				events = append(events, on+" "+w.Reason)
			}
			if strings.Join(events, ",") != strings.Join(tt.wantEvents, ",") {
				t.Errorf("events %v, want %v", events, tt.wantEvents)
			}
			if tt.host != nil && !proto.Equal(tt.host, hostCopy) {
				t.Errorf("host config modified: %v", tt.host)
			}
		})
	}
}

// The kubelet's messages, word for word.
func TestDNSWarningMessages(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metaWith("web", "default", "uid-1", nil, nil), Spec: v1.PodSpec{DNSPolicy: v1.DNSClusterFirst}}
	_, warnings := podDNSConfig(pod, &runtimeapi.DNSConfig{Servers: []string{"1.0.0.1", "1.0.0.2", "1.0.0.3", "1.0.0.4"}}, SandboxOptions{})
	const msg = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	want := []DNSWarning{
		{OnNode: true, Reason: "MissingClusterDNS", Message: msg},
		{Reason: "MissingClusterDNS", Message: `pod: "web_default(uid-1)". ` + msg},
		{Reason: "DNSConfigForming", Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.0.0.1 1.0.0.2 1.0.0.3"},
	}
	if len(warnings) != len(want) {
		t.Fatalf("got %+v", warnings)
	}
	for i := range want {
		if warnings[i] != want[i] {
			t.Errorf("[%d] = %+v\nwant %+v", i, warnings[i], want[i])
		}
	}
}

// The kubelet's TestFormDNSSearchFitsLimits.
func TestFitSearches(t *testing.T) {
	list2048 := []string{strings.Repeat("A", 128)}
	for i := 0; i < 15; i++ {
		list2048 = append(list2048, strings.Repeat("A", 127))
	}
	var thirtyThree []string
	for i := 4; i <= 33; i++ {
		thirtyThree = append(thirtyThree, strconv.Itoa(i))
	}
	thirtyThree = append([]string{"testNS.svc.TEST", "svc.TEST", "TEST"}, thirtyThree...)
	const prefix = "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "
	tests := []struct {
		name    string
		in      []string
		want    []string
		message string
	}{
		{name: "3 paths", in: []string{"testNS.svc.TEST", "svc.TEST", "TEST"}, want: []string{"testNS.svc.TEST", "svc.TEST", "TEST"}},
		{name: "5 paths", in: []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, want: []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}},
		{name: "a path of 256 characters", in: []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", strings.Repeat("B", 256), "BBB"},
			want: []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, message: prefix + "testNS.svc.TEST svc.TEST TEST AAA BBB"},
		{name: "2048 characters", in: list2048, want: list2048},
		{name: "2050 characters", in: append(append([]string{}, list2048...), "B"), want: list2048, message: prefix + strings.Join(list2048, " ")},
		{name: "32 paths", in: thirtyThree[:32], want: thirtyThree[:32]},
		{name: "33 paths", in: thirtyThree, want: thirtyThree[:32], message: prefix + strings.Join(thirtyThree[:32], " ")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, w := fitSearches(append([]string{}, tt.in...))
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			switch {
			case tt.message == "" && w != nil:
				t.Errorf("unexpected warning %+v", w)
			case tt.message != "" && (w == nil || w.Message != tt.message || w.Reason != ReasonDNSConfigForming || w.OnNode):
				t.Errorf("warning %+v, want %q", w, tt.message)
			}
		})
	}
}
