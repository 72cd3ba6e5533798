package certificate

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/connrotation"
)

type atomicCert struct {
	mu sync.Mutex
	c  *tls.Certificate
}

func (a *atomicCert) load() *tls.Certificate {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.c
}

func (a *atomicCert) store(c *tls.Certificate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.c = c
}

func newTestDialer() *connrotation.Dialer {
	return connrotation.NewDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
