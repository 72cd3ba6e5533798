// Command grpchealth is a gRPC server with only the standard health service
// (grpc.health.v1.Health), for testing gRPC probes. "" and the services in
// -serving answer SERVING, those in -not-serving NOT_SERVING, any other
// NotFound. With HEALTH_FILE set, SERVING turns into NOT_SERVING while that
// file does not exist, so a test can flip the answer from inside the
// container.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	port := flag.Int("port", 50051, "TCP port to listen on")
	serving := flag.String("serving", "", "comma-separated services that answer SERVING")
	notServing := flag.String("not-serving", "", "comma-separated services that answer NOT_SERVING")
	flag.Parse()
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		slog.Error("listen", "err", err)
		os.Exit(1)
	}
	// As PID 1 in a container, SIGTERM does nothing unless handled.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	slog.Info("serving grpc.health.v1", "addr", ln.Addr().String())
	if err := serve(ctx, ln, newHealth(*serving, *notServing, os.Getenv("HEALTH_FILE"))); err != nil {
		slog.Error("serve", "err", err)
		os.Exit(1)
	}
}

// serve serves h on ln until ctx ends.
func serve(ctx context.Context, ln net.Listener, h healthpb.HealthServer) error {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		srv.Stop() // Watch streams never end on their own: do not wait for them.
		<-served
		return nil
	}
}

func newHealth(serving, notServing, file string) healthpb.HealthServer {
	hs := health.NewServer() // "" is SERVING
	set := func(list string, st healthpb.HealthCheckResponse_ServingStatus) {
		for _, svc := range strings.Split(list, ",") {
			if svc = strings.TrimSpace(svc); svc != "" {
				hs.SetServingStatus(svc, st)
			}
		}
	}
	set(serving, healthpb.HealthCheckResponse_SERVING)
	set(notServing, healthpb.HealthCheckResponse_NOT_SERVING)
	if file == "" {
		return hs
	}
	return fileGated{hs, file}
}

// fileGated answers Check like the standard health server, except that
// SERVING needs the file to exist. (Watch is not gated; probes use Check.)
type fileGated struct {
	*health.Server
	file string
}

func (g fileGated) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := g.Server.Check(ctx, req)
	if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
		if _, statErr := os.Stat(g.file); statErr != nil {
			return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
		}
	}
	return resp, err
}
