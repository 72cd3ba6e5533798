package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// runGRPC calls grpc.health.v1.Health/Check on the pod IP and port over a
// connection of its own (plaintext, as the kubelet: credentials are not
// supported), and succeeds when the service answers SERVING.
func (r *Runner) runGRPC(ctx context.Context, a *v1.GRPCAction, podIP string, timeout time.Duration) (Result, string, error) {
	host, err := targetHost("", podIP)
	if err != nil {
		return Unknown, "", fmt.Errorf("grpc: %w", err)
	}
	if a.Port <= 0 || a.Port > 65535 {
		return Unknown, "", fmt.Errorf("grpc.port: invalid port number %d", a.Port)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(a.Port)))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var dialed lastError
	// passthrough: the address is an IP and port, nothing to resolve. The
	// custom dialer also keeps gRPC from using a proxy from the environment.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(r.userAgent),
		grpc.WithContextDialer(func(ctx context.Context, target string) (net.Conn, error) {
			conn, err := r.dialer.DialContext(ctx, "tcp", target)
			dialed.set(err)
			return conn, err
		}))
	if err != nil {
		return Unknown, "", fmt.Errorf("grpc: client for %s: %w", addr, err)
	}
	defer conn.Close()

	if err := waitReady(ctx, conn); err != nil {
		// The kubelet's words, with the last dial error when there is one
		// ("connection refused") instead of a bare "context deadline exceeded".
		cause := dialed.get()
		if cause == nil {
			cause = err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %v", addr, timeout, cause), nil
		}
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %v", addr, cause), nil
	}

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ptr.Deref(a.Service, "")})
	if err != nil {
		switch st := status.Convert(err); st.Code() {
		case codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()), nil
		case codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}

// waitReady connects conn and waits until it is ready or ctx ends: a
// connection that is refused is retried within the timeout, as the
// kubelet's blocking dial does.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		case connectivity.Shutdown:
			return errors.New("connection shut down")
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// lastError keeps the outcome of the latest dial, which gRPC makes from its
// own goroutines.
type lastError struct {
	mu  sync.Mutex
	err error
}

func (l *lastError) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *lastError) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
