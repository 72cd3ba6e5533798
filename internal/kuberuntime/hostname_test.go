package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPodHostnameAndDomain(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metaWith("web-0", "prod", "u", nil, nil)}
	pod.Spec.Hostname = "web"
	pod.Spec.Subdomain = "headless"
	h, d, err := PodHostnameAndDomain(pod, "cluster.local")
	if err != nil || h != "web" || d != "headless.prod.svc.cluster.local" {
		t.Errorf("got %q, %q, %v", h, d, err)
	}
	pod.Spec.Subdomain = "Bad_Sub"
	if _, _, err := PodHostnameAndDomain(pod, "cluster.local"); err == nil {
		t.Error("invalid subdomain accepted")
	}
}

func TestHostsFile(t *testing.T) {
	aliases := []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo.local", "bar.local"}}}
	tests := []struct {
		name   string
		spec   v1.PodSpec
		ips    []string
		domain string
		want   string
	}{
		{
			name: "bridge pod",
			ips:  []string{"10.88.0.5", "fd00::5"},
			want: "# Kubernetes-managed hosts file.\n" +
				"127.0.0.1\tlocalhost\n" +
				"::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\n" +
				"fe00::0\tip6-mcastprefix\n" +
				"fe00::1\tip6-allnodes\n" +
				"fe00::2\tip6-allrouters\n" +
				"10.88.0.5\tweb-0\n" +
				"fd00::5\tweb-0\n",
		},
		{
			name:   "with subdomain and aliases",
			spec:   v1.PodSpec{Hostname: "web", Subdomain: "db", HostAliases: aliases},
			ips:    []string{"10.88.0.5"},
			domain: "cluster.local",
			want: "# Kubernetes-managed hosts file.\n" +
				"127.0.0.1\tlocalhost\n" +
				"::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\n" +
				"fe00::0\tip6-mcastprefix\n" +
				"fe00::1\tip6-allnodes\n" +
				"fe00::2\tip6-allrouters\n" +
				"10.88.0.5\tweb.db.prod.svc.cluster.local\tweb\n" +
				"\n# Entries added by HostAliases.\n" +
				"10.1.2.3\tfoo.local\tbar.local\n",
		},
		{
			name: "host network copies the node's file",
			spec: v1.PodSpec{HostNetwork: true, HostAliases: aliases},
			ips:  []string{"192.168.1.10"},
			want: "# Kubernetes-managed hosts file (host network).\n" +
				"127.0.0.1 localhost\n192.168.1.10 node-a\n" +
				"\n# Entries added by HostAliases.\n" +
				"10.1.2.3\tfoo.local\tbar.local\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metaWith("web-0", "prod", "u", nil, nil), Spec: tt.spec}
			got, err := HostsFile(pod, tt.ips, tt.domain, []byte("127.0.0.1 localhost\n192.168.1.10 node-a\n"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("HostsFile =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
