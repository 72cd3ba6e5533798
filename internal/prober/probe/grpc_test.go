package probe

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func grpcProbe(port int, service string) *v1.Probe {
	a := &v1.GRPCAction{Port: int32(port)}
	if service != "" {
		a.Service = ptr.To(service)
	}
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: a}}
}

// serveGRPC serves srv on 127.0.0.1 until the test ends and returns its port.
func serveGRPC(t *testing.T, srv *grpc.Server) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return portOf(t, ln.Addr().String())
}

// stuckHealth answers nothing until the caller gives up.
type stuckHealth struct {
	healthpb.UnimplementedHealthServer
}

func (stuckHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestGRPC(t *testing.T) {
	t.Parallel()
	userAgents := make(chan string, 16)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		userAgents <- strings.Join(md.Get("user-agent"), ",")
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("billing", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	port := serveGRPC(t, srv)

	noHealth := serveGRPC(t, grpc.NewServer())
	stuckSrv := grpc.NewServer()
	healthpb.RegisterHealthServer(stuckSrv, stuckHealth{})
	stuck := serveGRPC(t, stuckSrv)
	silent := portOf(t, silentListener(t).Addr().String())
	refused := closedPort(t)

	r := NewRunner(nil, testUserAgent)
	for _, tc := range []struct {
		name    string
		port    int
		service string
		want    Result
		out     string // prefix
		timeout bool
	}{
		{name: "serving", port: port, want: Success, out: "service healthy"},
		{name: "named service serving", port: port, service: "orders", want: Success, out: "service healthy"},
		{name: "not serving", port: port, service: "billing", want: Failure, out: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service", port: port, service: "shipping", want: Failure, out: "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"},
		{name: "no health service", port: noHealth, want: Failure, out: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health"},
		{name: "check never answers", port: stuck, want: Failure, out: "timeout: health rpc did not complete within 1s", timeout: true},
		{name: "never answers", port: silent, want: Failure, out: fmt.Sprintf(`timeout: failed to connect service "127.0.0.1:%d" within 1s`, silent), timeout: true},
		{name: "refused", port: refused, want: Failure, out: fmt.Sprintf(`timeout: failed to connect service "127.0.0.1:%d" within 1s: dial tcp 127.0.0.1:%[1]d: connect: connection refused`, refused), timeout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runProbe(r, grpcProbe(tc.port, tc.service), nil)
			t.Logf("%v after %v: %s", got.res, got.took, got.out)
			if got.err != nil || got.res != tc.want || !strings.HasPrefix(got.out, tc.out) {
				t.Fatalf("got %v, %q, %v; want %v, %q", got.res, got.out, got.err, tc.want, tc.out)
			}
			if tc.timeout {
				assertTimedOut(t, got.took, time.Second)
			}
		})
	}
	t.Run("user agent", func(t *testing.T) {
		runProbe(r, grpcProbe(port, ""), nil)
		if ua := <-userAgents; !strings.HasPrefix(ua, testUserAgent+" ") {
			t.Errorf("user-agent %q, want it to start with %q", ua, testUserAgent)
		}
	})
}

func TestGRPCBadSpec(t *testing.T) {
	r := NewRunner(nil, testUserAgent)
	if got := runProbe(r, grpcProbe(0, ""), nil); got.res != Unknown || got.err == nil || !strings.Contains(got.err.Error(), "grpc.port") {
		t.Errorf("port 0: got %v, %v; want Unknown and a grpc.port error", got.res, got.err)
	}
	res, _, err := r.Run(t.Context(), grpcProbe(50051, ""), testPod, &v1.Container{Name: "app"}, "cid", "")
	if res != Unknown || err == nil {
		t.Errorf("no pod IP: got %v, %v; want Unknown and an error", res, err)
	}
}
