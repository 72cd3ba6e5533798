package probe

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
)

// runTCP succeeds when a TCP connection to the port can be opened; like the
// kubelet it sends nothing and closes at once.
func (r *Runner) runTCP(ctx context.Context, a *v1.TCPSocketAction, c *v1.Container, podIP string, timeout time.Duration) (Result, string, error) {
	port, err := resolvePort(a.Port, c)
	if err != nil {
		return Unknown, "", fmt.Errorf("tcpSocket.port: %w", err)
	}
	host, err := targetHost(a.Host, podIP)
	if err != nil {
		return Unknown, "", fmt.Errorf("tcpSocket.host: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := r.dialer.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		// "dial tcp 10.0.0.2:80: connect: connection refused", "... i/o timeout"
		return Failure, err.Error(), nil
	}
	// The connection was made, which is all the probe asks; an error from
	// closing it says nothing about the container.
	_ = conn.Close()
	return Success, "", nil
}
