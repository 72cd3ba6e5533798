package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// start serves h on 127.0.0.1 until the test ends and returns a client.
func start(t *testing.T, h healthpb.HealthServer) healthpb.HealthClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, h) }()
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return healthpb.NewHealthClient(conn)
}

func check(t *testing.T, c healthpb.HealthClient, svc string) (healthpb.HealthCheckResponse_ServingStatus, codes.Code) {
	t.Helper()
	resp, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
	return resp.GetStatus(), status.Code(err)
}

func TestServices(t *testing.T) {
	c := start(t, newHealth("a, b", "c", ""))
	for svc, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"":  healthpb.HealthCheckResponse_SERVING,
		"a": healthpb.HealthCheckResponse_SERVING,
		"b": healthpb.HealthCheckResponse_SERVING,
		"c": healthpb.HealthCheckResponse_NOT_SERVING,
	} {
		if got, code := check(t, c, svc); got != want || code != codes.OK {
			t.Errorf("service %q: %v (%v), want %v", svc, got, code, want)
		}
	}
	if _, code := check(t, c, "d"); code != codes.NotFound {
		t.Errorf("unknown service: %v, want NotFound", code)
	}
}

func TestHealthFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "healthy")
	c := start(t, newHealth("a", "c", file))
	expect := func(svc string, want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		if got, code := check(t, c, svc); got != want || code != codes.OK {
			t.Errorf("service %q: %v (%v), want %v", svc, got, code, want)
		}
	}
	expect("", healthpb.HealthCheckResponse_NOT_SERVING)
	expect("a", healthpb.HealthCheckResponse_NOT_SERVING)
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect("", healthpb.HealthCheckResponse_SERVING)
	expect("a", healthpb.HealthCheckResponse_SERVING)
	expect("c", healthpb.HealthCheckResponse_NOT_SERVING)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	expect("", healthpb.HealthCheckResponse_NOT_SERVING)
}
