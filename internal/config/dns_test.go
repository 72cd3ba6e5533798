package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadDNS(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		file    string
		args    []string
		want    DNS
		wantErr []string
	}{
		{name: "defaults", want: DNS{ResolvConf: "/etc/resolv.conf"}},
		{name: "file", file: header + "clusterDNS: [10.96.0.10, 'fd00::a']\nclusterDomain: cluster.local\nresolvConf: " + resolv + "\n",
			want: DNS{ClusterDNS: []string{"10.96.0.10", "fd00::a"}, ClusterDomain: "cluster.local", ResolvConf: resolv}},
		{name: "resolvConf empty in the file means none", file: header + "resolvConf: \"\"\n", want: DNS{}},
		{name: "flags", args: []string{"--cluster-dns=10.220.0.10,10.220.0.11", "--cluster-domain=example.internal", "--resolv-conf=" + resolv},
			want: DNS{ClusterDNS: []string{"10.220.0.10", "10.220.0.11"}, ClusterDomain: "example.internal", ResolvConf: resolv}},
		{name: "flags override the file", file: header + "clusterDNS: [10.96.0.10]\nclusterDomain: cluster.local\n",
			args: []string{"--cluster-dns=10.0.0.10", "--resolv-conf="},
			want: DNS{ClusterDNS: []string{"10.0.0.10"}, ClusterDomain: "cluster.local"}},
		{name: "bad IP", args: []string{"--cluster-dns=10.0.0.10,dns.example"},
			wantErr: []string{`clusterDNS (--cluster-dns): [1] "dns.example" is not an IP address`}},
		{name: "bad IP in the file", file: header + "clusterDNS: [10.0.0.300]\n",
			wantErr: []string{`clusterDNS (--cluster-dns): [0] "10.0.0.300" is not an IP address`}},
		{name: "bad domain", args: []string{"--cluster-domain=Cluster_Local"},
			wantErr: []string{`clusterDomain (--cluster-domain): "Cluster_Local" is not a valid DNS domain (RFC 1123)`}},
		{name: "trailing dot", file: header + "clusterDomain: cluster.local.\n",
			wantErr: []string{`clusterDomain (--cluster-domain): "cluster.local." is not a valid DNS domain (RFC 1123)`}},
		{name: "missing resolv.conf", args: []string{"--resolv-conf=" + filepath.Join(dir, "absent")},
			wantErr: []string{"resolvConf (--resolv-conf): open " + filepath.Join(dir, "absent") + ": no such file or directory"}},
		{name: "resolv.conf a directory", args: []string{"--resolv-conf=" + dir},
			wantErr: []string{"resolvConf (--resolv-conf): reading " + dir + ":"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadWith(t, tt.file, tt.args, testHost)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\nlacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.DNS, tt.want) {
				t.Errorf("DNS = %+v, want %+v", cfg.DNS, tt.want)
			}
			kc := cfg.Kubelet
			if !reflect.DeepEqual(kc.ClusterDNS, tt.want.ClusterDNS) || kc.ClusterDomain != tt.want.ClusterDomain ||
				kc.ResolverConfig == nil || *kc.ResolverConfig != tt.want.ResolvConf {
				t.Errorf("written back: %v %q %v", kc.ClusterDNS, kc.ClusterDomain, kc.ResolverConfig)
			}
			if len(cfg.Unimplemented) != 0 {
				t.Errorf("Unimplemented = %v", cfg.Unimplemented)
			}
		})
	}
}

func TestClusterDNSAddresses(t *testing.T) {
	d := DNS{ClusterDNS: []string{"10.96.0.10", "FD00:0:0::A", "010.0.0.1"}}
	if got, want := d.ClusterDNSAddresses(), []string{"10.96.0.10", "fd00::a", "10.0.0.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
