package probe

import (
	"context"
	"fmt"
	"net"
)

// dialer opens the TCP connections of every network probe with SO_LINGER 0,
// so that closing one sends a RST and leaves no socket in TIME_WAIT on
// either side (a node probing hundreds of containers every few seconds
// would otherwise pile up tens of thousands of them; kubernetes #89898).
//
// The kubelet sets a linger of 1s instead (kubernetes #115143) to close with
// a FIN, but on Linux a non-zero linger only makes close wait for unsent
// data: it does not shorten TIME_WAIT. Only 0 does. A probe has nothing left
// to send when it closes, so the reset costs nothing but a "connection reset
// by peer" the target may log.
type dialer struct {
	net.Dialer
}

func newDialer() *dialer {
	// Keep-alive probes are pointless on a connection that lives for one
	// request.
	return &dialer{net.Dialer{KeepAlive: -1}}
}

// DialContext dials addr and sets SO_LINGER 0 on the connection.
func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := d.Dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("set SO_LINGER on the connection to %s: %w", addr, err)
		}
	}
	return conn, nil
}
