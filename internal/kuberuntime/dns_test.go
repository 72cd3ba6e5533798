package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *runtimeapi.DNSConfig
		wantErr string
	}{
		{name: "empty", in: "", want: &runtimeapi.DNSConfig{}},
		{
			name: "typical",
			in:   "# generated\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch corp.example.com example.com.\noptions ndots:2 timeout:1\n",
			want: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.2", "10.0.0.3"}, Searches: []string{"corp.example.com", "example.com"}, Options: []string{"ndots:2", "timeout:1"}},
		},
		{
			name: "last search wins, root domain dropped, comments and blanks skipped",
			in:   "search a.example\n\n; comment\n   # indented comment\nsearch b.example . c.example\n",
			want: &runtimeapi.DNSConfig{Searches: []string{"b.example", "c.example"}},
		},
		{
			name: "domain counts as a search line",
			in:   "search a.example\ndomain d.example\n",
			want: &runtimeapi.DNSConfig{Searches: []string{"d.example"}},
		},
		{
			name: "options accumulate and a later one replaces its name",
			in:   "options ndots:2 rotate\noptions ndots:3 edns0\n",
			want: &runtimeapi.DNSConfig{Options: []string{"ndots:3", "rotate", "edns0"}},
		},
		{
			name: "tabs and trailing spaces",
			in:   "nameserver\t1.1.1.1   \n\tnameserver 8.8.8.8 # trailing\n",
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8"}},
		},
		{name: "nameserver without address", in: "nameserver\n", wantErr: "line 1: nameserver without an address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseResolvConf([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
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
}

func TestPodDNSConfig(t *testing.T) {
	host := &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1"}, Searches: []string{"lan"}, Options: []string{"ndots:1", "edns0"}}
	podDNS := &v1.PodDNSConfig{
		Nameservers: []string{"8.8.8.8", "192.168.1.1"},
		Searches:    []string{"extra.example", "lan"},
		Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr("3")}, {Name: "single-request"}},
	}
	tests := []struct {
		name          string
		policy        v1.DNSPolicy
		hostNetwork   bool
		dnsConfig     *v1.PodDNSConfig
		host          *runtimeapi.DNSConfig
		clusterDNS    []string
		clusterDomain string
		want          *runtimeapi.DNSConfig
		wantErr       bool
	}{
		{name: "Default uses the node's resolver", policy: v1.DNSDefault, host: host,
			want: &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1"}, Searches: []string{"lan"}, Options: []string{"ndots:1", "edns0"}}},
		{name: "ClusterFirst without cluster DNS falls back to the node", policy: v1.DNSClusterFirst, host: host,
			want: &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1"}, Searches: []string{"lan"}, Options: []string{"ndots:1", "edns0"}}},
		{name: "ClusterFirst with cluster DNS", policy: v1.DNSClusterFirst, host: host, clusterDNS: []string{"10.96.0.10"}, clusterDomain: "cluster.local",
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "lan"}, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst on the host network uses the node", policy: v1.DNSClusterFirst, hostNetwork: true, host: host, clusterDNS: []string{"10.96.0.10"},
			want: &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1"}, Searches: []string{"lan"}, Options: []string{"ndots:1", "edns0"}}},
		{name: "ClusterFirstWithHostNet uses the cluster", policy: v1.DNSClusterFirstWithHostNet, hostNetwork: true, host: host, clusterDNS: []string{"10.96.0.10"},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"lan"}, Options: []string{"ndots:5"}}},
		{name: "no node resolver", policy: v1.DNSDefault,
			want: &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}},
		{name: "None takes only dnsConfig", policy: v1.DNSNone, host: host, dnsConfig: podDNS,
			want: &runtimeapi.DNSConfig{Servers: []string{"8.8.8.8", "192.168.1.1"}, Searches: []string{"extra.example", "lan"}, Options: []string{"ndots:3", "single-request"}}},
		{name: "dnsConfig merges into Default", policy: v1.DNSDefault, host: host, dnsConfig: podDNS,
			want: &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "8.8.8.8"}, Searches: []string{"lan", "extra.example"}, Options: []string{"ndots:3", "edns0", "single-request"}}},
		{name: "too many nameservers are cut to 3", policy: v1.DNSDefault,
			host: &runtimeapi.DNSConfig{Servers: []string{"1.0.0.1", "1.0.0.2", "1.0.0.3", "1.0.0.4"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"1.0.0.1", "1.0.0.2", "1.0.0.3"}}},
		{name: "unknown policy", policy: "Sometimes", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metaWith("p", "ns1", "u", nil, nil),
				Spec: v1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNetwork, DNSConfig: tt.dnsConfig}}
			var hostCopy *runtimeapi.DNSConfig
			if tt.host != nil {
				hostCopy = proto.Clone(tt.host).(*runtimeapi.DNSConfig)
			}
			got, err := podDNSConfig(pod, tt.host, tt.clusterDNS, tt.clusterDomain)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
			if tt.host != nil && !proto.Equal(tt.host, hostCopy) {
				t.Errorf("host config modified: %v", tt.host)
			}
		})
	}
}

func TestFitSearches(t *testing.T) {
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, strings.Repeat(string(rune('a'+i%26)), 10))
	}
	if got := fitSearches(many); len(got) != 32 {
		t.Errorf("kept %d searches, want 32", len(got))
	}
	long := strings.Repeat("x", 254)
	if got := fitSearches([]string{"ok", long, "fine"}); strings.Join(got, " ") != "ok fine" {
		t.Errorf("got %v", got)
	}
	var wide []string
	for i := 0; i < 10; i++ {
		wide = append(wide, strings.Repeat(string(rune('a'+i)), 250))
	}
	got := fitSearches(wide)
	if n := len(strings.Join(got, " ")); n > 2048 || len(got) != 8 {
		t.Errorf("kept %d searches of %d characters, want 8 within 2048", len(got), n)
	}
}
