package probe

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const testUserAgent = "kube-probe/1.37"

var testPod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}

// attempt is what one Run returned, and how long it took.
type attempt struct {
	res  Result
	out  string
	err  error
	took time.Duration
}

// runProbe runs p against container c of a pod whose IP is 127.0.0.1.
func runProbe(r *Runner, p *v1.Probe, c *v1.Container) attempt {
	if c == nil {
		c = &v1.Container{Name: "app"}
	}
	start := time.Now()
	res, out, err := r.Run(context.Background(), p, testPod, c, "cid", "127.0.0.1")
	return attempt{res, out, err, time.Since(start)}
}

// portOf returns the port of a host:port address or an http(s) URL.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("split %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("port of %q: %v", addr, err)
	}
	return n
}

// silentListener accepts connections on 127.0.0.1 and never reads from or
// writes to them: a target that hangs. Everything is closed at cleanup.
func silentListener(t *testing.T) net.Listener {
	t.Helper()
	return serveRaw(t, func(net.Conn) {})
}

// serveRaw accepts connections on 127.0.0.1 and hands each to handle; the
// connections that handle leaves open are closed at cleanup.
func serveRaw(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			handle(conn)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln
}

// closedPort returns a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := portOf(t, ln.Addr().String())
	ln.Close()
	return port
}

// assertTimedOut checks that a probe against a hanging target gave up after
// about its timeout: not before, and not much after.
func assertTimedOut(t *testing.T, took, timeout time.Duration) {
	t.Helper()
	if took < timeout-50*time.Millisecond || took > timeout+750*time.Millisecond {
		t.Errorf("probe took %v, want about %v", took, timeout)
	}
}
