package cluster

import (
	"bufio"
	"net"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestKubeProxyChains(t *testing.T) {
	for _, tc := range []struct {
		name, save string
		want       []string
	}{
		{"none", "*nat\n:PREROUTING ACCEPT [0:0]\n:CNI-abc - [0:0]\nCOMMIT\n", nil},
		{"kubelet's canaries are not kube-proxy's",
			"*mangle\n:KUBE-IPTABLES-HINT - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n", nil},
		{"kube-proxy's, by table",
			"# Generated\n*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-ABC - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n",
			[]string{"nat/KUBE-SERVICES", "nat/KUBE-SVC-ABC", "filter/KUBE-FORWARD"}},
		{"a rule naming a chain does not declare it", "*nat\n-A OUTPUT -j KUBE-SERVICES\nCOMMIT\n", nil},
	} {
		if got := kubeProxyChains(tc.save); !slices.Equal(got, tc.want) {
			t.Errorf("%s: kubeProxyChains = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNftKubeProxyTables(t *testing.T) {
	list := "table inet filter\ntable ip kube-proxy\ntable ip6 kube-proxy\ntable ip nat\ntable ip kube-proxy-other\n"
	if got, want := nftKubeProxyTables(list), []string{"ip kube-proxy", "ip6 kube-proxy"}; !slices.Equal(got, want) {
		t.Errorf("nftKubeProxyTables = %v, want %v", got, want)
	}
}

func TestDefaultRouteDevice(t *testing.T) {
	table := "Iface\tDestination\tGateway\tFlags\nbr0\t0000DF0A\t00000000\t0001\neth0\t00000000\t010200C0\t0003\n"
	if got, err := defaultRouteDevice(bufio.NewScanner(strings.NewReader(table))); err != nil || got != "eth0" {
		t.Errorf("defaultRouteDevice = %q, %v, want eth0", got, err)
	}
	if _, err := defaultRouteDevice(bufio.NewScanner(strings.NewReader("Iface\tDestination\nbr0\t0000DF0A\n"))); err == nil {
		t.Error("defaultRouteDevice without a default route: no error")
	}
}

func TestKubeProxyConfig(t *testing.T) {
	text := kubeProxyConfig("/x/kp.kubeconfig", KubeProxyOptions{ClusterCIDR: "10.223.0.0/16", NodeName: "n1"}, 1001, 1002)
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, text)
	}
	for k, want := range map[string]any{
		"mode": "iptables", "clusterCIDR": "10.223.0.0/16", "hostnameOverride": "n1",
		"healthzBindAddress": "127.0.0.1:1001", "metricsBindAddress": "127.0.0.1:1002",
	} {
		if cfg[k] != want {
			t.Errorf("%s = %v, want %v", k, cfg[k], want)
		}
	}
	// The host's conntrack settings are kept: 0 means leave alone.
	if ct := cfg["conntrack"].(map[string]any); ct["maxPerCore"] != float64(0) || ct["tcpEstablishedTimeout"] != "0s" {
		t.Errorf("conntrack = %v", ct)
	}
}

func TestCorefile(t *testing.T) {
	got := corefileFor(&net.UDPAddr{IP: net.IPv4(192, 0, 2, 2), Port: 1053}, "/x/dns.kubeconfig", 2001, 2002)
	for _, want := range []string{".:1053 {", "bind 192.0.2.2", "ready 127.0.0.1:2001", "health 127.0.0.1:2002",
		"kubernetes cluster.local in-addr.arpa ip6.arpa {", "kubeconfig /x/dns.kubeconfig berth-test", "forward . /etc/resolv.conf"} {
		if !strings.Contains(got, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, got)
		}
	}
}
