package envvars

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func service(namespace, name, clusterIP string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: clusterIP, Ports: ports},
	}
}

func port(name string, number int32, proto v1.Protocol) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: number, Protocol: proto}
}

func TestFromServices(t *testing.T) {
	tests := []struct {
		name     string
		services []*v1.Service
		want     []v1.EnvVar
	}{
		{
			name:     "the master service, as in every pod of a cluster",
			services: []*v1.Service{service("default", "kubernetes", "10.0.0.1", port("https", 443, v1.ProtocolTCP))},
			want: []v1.EnvVar{
				{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"},
				{Name: "KUBERNETES_SERVICE_PORT", Value: "443"},
				{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: "443"},
				{Name: "KUBERNETES_PORT", Value: "tcp://10.0.0.1:443"},
				{Name: "KUBERNETES_PORT_443_TCP", Value: "tcp://10.0.0.1:443"},
				{Name: "KUBERNETES_PORT_443_TCP_PROTO", Value: "tcp"},
				{Name: "KUBERNETES_PORT_443_TCP_PORT", Value: "443"},
				{Name: "KUBERNETES_PORT_443_TCP_ADDR", Value: "10.0.0.1"},
			},
		},
		{
			// The kubelet's own TestFromServices.
			name: "kubelet example: dashes, protocols, numeric port names, no cluster IP",
			services: []*v1.Service{
				service("", "foo-bar", "1.2.3.4", port("", 8080, v1.ProtocolTCP)),
				service("", "abc-123", "5.6.7.8", port("u-d-p", 8081, v1.ProtocolUDP), port("t-c-p", 8081, v1.ProtocolTCP)),
				service("", "q-u-u-x", "9.8.7.6", port("", 8082, v1.ProtocolTCP), port("8083", 8083, v1.ProtocolTCP)),
				service("", "svrc-clusterip-none", "None", port("", 8082, v1.ProtocolTCP)),
				service("", "svrc-clusterip-empty", "", port("", 8082, v1.ProtocolTCP)),
			},
			want: []v1.EnvVar{
				{Name: "FOO_BAR_SERVICE_HOST", Value: "1.2.3.4"},
				{Name: "FOO_BAR_SERVICE_PORT", Value: "8080"},
				{Name: "FOO_BAR_PORT", Value: "tcp://1.2.3.4:8080"},
				{Name: "FOO_BAR_PORT_8080_TCP", Value: "tcp://1.2.3.4:8080"},
				{Name: "FOO_BAR_PORT_8080_TCP_PROTO", Value: "tcp"},
				{Name: "FOO_BAR_PORT_8080_TCP_PORT", Value: "8080"},
				{Name: "FOO_BAR_PORT_8080_TCP_ADDR", Value: "1.2.3.4"},
				{Name: "ABC_123_SERVICE_HOST", Value: "5.6.7.8"},
				{Name: "ABC_123_SERVICE_PORT", Value: "8081"},
				{Name: "ABC_123_SERVICE_PORT_U_D_P", Value: "8081"},
				{Name: "ABC_123_SERVICE_PORT_T_C_P", Value: "8081"},
				{Name: "ABC_123_PORT", Value: "udp://5.6.7.8:8081"},
				{Name: "ABC_123_PORT_8081_UDP", Value: "udp://5.6.7.8:8081"},
				{Name: "ABC_123_PORT_8081_UDP_PROTO", Value: "udp"},
				{Name: "ABC_123_PORT_8081_UDP_PORT", Value: "8081"},
				{Name: "ABC_123_PORT_8081_UDP_ADDR", Value: "5.6.7.8"},
				{Name: "ABC_123_PORT_8081_TCP", Value: "tcp://5.6.7.8:8081"},
				{Name: "ABC_123_PORT_8081_TCP_PROTO", Value: "tcp"},
				{Name: "ABC_123_PORT_8081_TCP_PORT", Value: "8081"},
				{Name: "ABC_123_PORT_8081_TCP_ADDR", Value: "5.6.7.8"},
				{Name: "Q_U_U_X_SERVICE_HOST", Value: "9.8.7.6"},
				{Name: "Q_U_U_X_SERVICE_PORT", Value: "8082"},
				{Name: "Q_U_U_X_SERVICE_PORT_8083", Value: "8083"},
				{Name: "Q_U_U_X_PORT", Value: "tcp://9.8.7.6:8082"},
				{Name: "Q_U_U_X_PORT_8082_TCP", Value: "tcp://9.8.7.6:8082"},
				{Name: "Q_U_U_X_PORT_8082_TCP_PROTO", Value: "tcp"},
				{Name: "Q_U_U_X_PORT_8082_TCP_PORT", Value: "8082"},
				{Name: "Q_U_U_X_PORT_8082_TCP_ADDR", Value: "9.8.7.6"},
				{Name: "Q_U_U_X_PORT_8083_TCP", Value: "tcp://9.8.7.6:8083"},
				{Name: "Q_U_U_X_PORT_8083_TCP_PROTO", Value: "tcp"},
				{Name: "Q_U_U_X_PORT_8083_TCP_PORT", Value: "8083"},
				{Name: "Q_U_U_X_PORT_8083_TCP_ADDR", Value: "9.8.7.6"},
			},
		},
		{
			name:     "IPv6 cluster IP is bracketed in URLs only; no protocol means TCP; SCTP",
			services: []*v1.Service{service("", "db", "fd00::a", port("", 5432, ""), port("sig", 2905, v1.ProtocolSCTP))},
			want: []v1.EnvVar{
				{Name: "DB_SERVICE_HOST", Value: "fd00::a"},
				{Name: "DB_SERVICE_PORT", Value: "5432"},
				{Name: "DB_SERVICE_PORT_SIG", Value: "2905"},
				{Name: "DB_PORT", Value: "tcp://[fd00::a]:5432"},
				{Name: "DB_PORT_5432_TCP", Value: "tcp://[fd00::a]:5432"},
				{Name: "DB_PORT_5432_TCP_PROTO", Value: "tcp"},
				{Name: "DB_PORT_5432_TCP_PORT", Value: "5432"},
				{Name: "DB_PORT_5432_TCP_ADDR", Value: "fd00::a"},
				{Name: "DB_PORT_2905_SCTP", Value: "sctp://[fd00::a]:2905"},
				{Name: "DB_PORT_2905_SCTP_PROTO", Value: "sctp"},
				{Name: "DB_PORT_2905_SCTP_PORT", Value: "2905"},
				{Name: "DB_PORT_2905_SCTP_ADDR", Value: "fd00::a"},
			},
		},
		{
			name:     "a service with a cluster IP and no port has no variables",
			services: []*v1.Service{service("", "odd", "10.0.0.9")},
		},
		{name: "no services"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromServices(tt.services); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromServices =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

func pod(namespace string, links *bool) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "p"},
		Spec:       v1.PodSpec{EnableServiceLinks: links},
	}
}

func TestForPod(t *testing.T) {
	yes, no := new(true), new(false)
	https := port("https", 443, v1.ProtocolTCP)
	web := port("http", 80, v1.ProtocolTCP)
	master := service("default", "kubernetes", "10.0.0.1", https)
	// The services of the kubelet's TestMakeEnvironmentVariables, and a
	// few more.
	all := []*v1.Service{
		service("test1", "kubernetes", "1.2.3.1", web),
		service("test2", "test", "1.2.3.3", web),
		service("test1", "test", "1.2.3.4", web),
		service("test1", "headless", "None", web),
		service("test1", "external", "", web),
		service("default", "not-special", "1.2.3.8", web),
		master,
		service("kubernetes", "kubernetes", "1.2.3.6", web),
		service("default", "zzz", "1.2.3.9", web),
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want []string // namespace/name, in order
	}{
		{
			name: "service links: the namespace's services, its kubernetes winning over the master one",
			pod:  pod("test1", yes),
			want: []string{"test1/kubernetes", "test1/test"},
		},
		{
			name: "enableServiceLinks unset means true",
			pod:  pod("test2", nil),
			want: []string{"default/kubernetes", "test2/test"},
		},
		{
			name: "no service links: the master service only",
			pod:  pod("test1", no),
			want: []string{"default/kubernetes"},
		},
		{
			name: "default namespace with links: all of it",
			pod:  pod("default", yes),
			want: []string{"default/kubernetes", "default/not-special", "default/zzz"},
		},
		{
			name: "default namespace without links: the master service only",
			pod:  pod("default", no),
			want: []string{"default/kubernetes"},
		},
		{
			name: "a namespace named kubernetes is not the master's",
			pod:  pod("kubernetes", no),
			want: []string{"default/kubernetes"},
		},
		{
			name: "a namespace without services",
			pod:  pod("empty", yes),
			want: []string{"default/kubernetes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range ForPod(tt.pod, all) {
				got = append(got, s.Namespace+"/"+s.Name)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ForPod = %v, want %v", got, tt.want)
			}
		})
	}
	if got := ForPod(pod("test1", yes), []*v1.Service{service("default", "kubernetes", "None", https)}); len(got) != 0 {
		t.Errorf("a headless master service: %v", got)
	}
}

func TestNamespaces(t *testing.T) {
	no := new(false)
	tests := []struct {
		pod  *v1.Pod
		want []string
	}{
		{pod("web", nil), []string{"default", "web"}},
		{pod("web", no), []string{"default"}},
		{pod("default", nil), []string{"default"}},
	}
	for _, tt := range tests {
		if got := Namespaces(tt.pod); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Namespaces(%s, links %v) = %v, want %v", tt.pod.Namespace, tt.pod.Spec.EnableServiceLinks, got, tt.want)
		}
	}
}
