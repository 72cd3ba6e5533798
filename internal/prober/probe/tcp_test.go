package probe

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func tcpProbe(port intstr.IntOrString) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: port}}}
}

func TestTCP(t *testing.T) {
	open := silentListener(t)
	openPort := portOf(t, open.Addr().String())
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "db", ContainerPort: int32(openPort)}}}
	r := NewRunner(nil, testUserAgent)

	for _, tc := range []struct {
		name   string
		probe  *v1.Probe
		want   Result
		outHas string
		errHas string
	}{
		{name: "accepted", probe: tcpProbe(intstr.FromInt32(int32(openPort))), want: Success},
		{name: "named port", probe: tcpProbe(intstr.FromString("db")), want: Success},
		{name: "refused", probe: tcpProbe(intstr.FromInt32(int32(closedPort(t)))), want: Failure, outHas: "dial tcp 127.0.0.1:"},
		{name: "unknown port name", probe: tcpProbe(intstr.FromString("cache")), errHas: `tcpSocket.port: port "cache" not found in the ports of container "app"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runProbe(r, tc.probe, c)
			if tc.errHas != "" {
				if got.err == nil || !strings.Contains(got.err.Error(), tc.errHas) || got.res != Unknown {
					t.Fatalf("got %v, %v; want Unknown and an error containing %q", got.res, got.err, tc.errHas)
				}
				return
			}
			if got.err != nil || got.res != tc.want || !strings.Contains(got.out, tc.outHas) {
				t.Fatalf("got %v, %q, %v; want %v with %q", got.res, got.out, got.err, tc.want, tc.outHas)
			}
			if tc.want == Failure && !strings.HasSuffix(got.out, "connect: connection refused") {
				t.Errorf("output %q does not say the connection was refused", got.out)
			}
		})
	}
}

func TestTCPHostOverridesPodIP(t *testing.T) {
	open := silentListener(t)
	p := tcpProbe(intstr.FromInt32(int32(portOf(t, open.Addr().String()))))
	p.TCPSocket.Host = "127.0.0.1"
	r := NewRunner(nil, testUserAgent)
	res, out, err := r.Run(t.Context(), p, testPod, &v1.Container{Name: "app"}, "cid", "")
	if res != Success || err != nil {
		t.Fatalf("got %v, %q, %v", res, out, err)
	}
	p.TCPSocket.Host = ""
	if res, _, err := r.Run(t.Context(), p, testPod, &v1.Container{Name: "app"}, "cid", ""); res != Unknown || err == nil {
		t.Fatalf("no host and no pod IP: got %v, %v; want Unknown and an error", res, err)
	}
}
