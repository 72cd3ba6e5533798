package probe

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestProbesLeaveNoTimeWait: hundreds of probes in a row leave no socket in
// TIME_WAIT on the probing side (kubernetes #89898).
func TestProbesLeaveNoTimeWait(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(web.Close)
	webPort := portOf(t, web.URL)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	grpcPort := serveGRPC(t, srv)
	r := NewRunner(nil, testUserAgent)

	for _, tc := range []struct {
		name  string
		port  int
		runs  int
		probe func() Result
	}{
		{name: "http", port: webPort, runs: 200, probe: func() Result { return runProbe(r, httpProbe(webPort, "/"), nil).res }},
		{name: "tcp", port: webPort, runs: 200, probe: func() Result { return runProbe(r, tcpProbe(intstr.FromInt32(int32(webPort))), nil).res }},
		{name: "grpc", port: grpcPort, runs: 50, probe: func() Result { return runProbe(r, grpcProbe(grpcPort, ""), nil).res }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.runs {
				if res := tc.probe(); res != Success {
					t.Fatalf("probe %d: %v", i, res)
				}
			}
			if n := timeWaitTo(t, tc.port); n != 0 {
				t.Errorf("%d %s probes left %d sockets in TIME_WAIT", tc.runs, tc.name, n)
			}
		})
	}
}

// timeWaitTo counts the IPv4 sockets in TIME_WAIT whose remote port is port:
// the client side of connections to a server listening there.
func timeWaitTo(t *testing.T, port int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	remote := fmt.Sprintf(":%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st ...
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && fields[3] == "06" && strings.HasSuffix(fields[2], remote) {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
