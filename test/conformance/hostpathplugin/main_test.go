package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	o, err := parse([]string{"--v=5", "--endpoint=/var/lib/kubelet/plugins/d/dra.sock", "--proxy-endpoint=tcp://:9000"})
	if err != nil {
		t.Fatal(err)
	}
	if o.endpoint != "/var/lib/kubelet/plugins/d/dra.sock" || o.proxy != ":9000" || !o.verbose {
		t.Fatalf("parsed %+v", o)
	}
	o, err = parse([]string{"-endpoint", "unix:///tmp/x.sock", "-proxy-endpoint", "tcp://127.0.0.1:1"})
	if err != nil || o.endpoint != "/tmp/x.sock" || o.proxy != "127.0.0.1:1" || o.verbose {
		t.Fatalf("parsed %+v, %v", o, err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoint=/x.sock", "--drivername=hostpath.csi.k8s.io"}, "--drivername: not supported"},
		{[]string{"--endpoint=/x.sock"}, "--proxy-endpoint is required"},
		{[]string{"--endpoint=/x.sock", "--proxy-endpoint=unix:///y"}, "want tcp://"},
		{[]string{"--proxy-endpoint=tcp://:1"}, "--endpoint \"\""},
		{[]string{"--endpoint=tcp://:2", "--proxy-endpoint=tcp://:1"}, "want a unix socket path"},
		{[]string{"--endpoint"}, "needs a value"},
		{[]string{"serve"}, "unexpected argument"},
	} {
		if _, err := parse(bad.args); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("parse(%q) = %v, want an error with %q", bad.args, err, bad.want)
		}
	}
}

// startServe runs serve on a fresh unix socket and TCP port; stop cancels
// it and returns serve's error.
func startServe(t *testing.T) (sock, tcp string, stop func() error) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "s.sock")
	local, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		local.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, local, remote, t.Logf) }()
	var stopped bool
	var serr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case serr = <-errc:
			case <-time.After(10 * time.Second):
				serr = errors.New("serve did not return within 10s of its cancellation")
			}
		}
		return serr
	}
	t.Cleanup(func() { _ = stop() })
	return sock, remote.Addr().String(), stop
}

func dial(t *testing.T, network, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends msg from a to b and checks that it arrives.
func exchange(t *testing.T, a, b net.Conn, msg string) {
	t.Helper()
	if _, err := a.Write([]byte(msg + "\n")); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(b).ReadString('\n')
	if err != nil || got != msg+"\n" {
		t.Fatalf("read %q, %v; want %q", got, err, msg)
	}
}

// closedByPeer checks that c reads EOF (its peer closed) within 5s.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 16))
	// A connection still in the listener's backlog when the listener
	// closes is reset rather than closed: gone either way.
	if n != 0 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("read %d bytes, %v; want EOF or a reset", n, err)
	}
}

// The TCP side connects ahead of any client, several at once, as the
// suite's port-forward listener does; each unix client gets the next one.
func TestPairsInOrder(t *testing.T) {
	sock, tcp, stop := startServe(t)
	remotes := []net.Conn{dial(t, "tcp", tcp), dial(t, "tcp", tcp), dial(t, "tcp", tcp)}
	u1 := dial(t, "unix", sock)
	exchange(t, u1, remotes[0], "first request")
	exchange(t, remotes[0], u1, "first reply")
	u2 := dial(t, "unix", sock)
	exchange(t, u2, remotes[1], "second request")
	exchange(t, remotes[1], u2, "second reply")

	// The unix side's close ends its pair only.
	u1.Close()
	closedByPeer(t, remotes[0])
	exchange(t, u2, remotes[1], "still there")
	// So does the TCP side's.
	remotes[1].Close()
	closedByPeer(t, u2)

	// The third waits for a client; the listener takes more meanwhile.
	remotes = append(remotes, dial(t, "tcp", tcp))
	u3 := dial(t, "unix", sock)
	exchange(t, u3, remotes[2], "third")
	u4 := dial(t, "unix", sock)
	exchange(t, remotes[3], u4, "fourth")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{u3, u4, remotes[2], remotes[3]} {
		closedByPeer(t, c)
	}
}

// A client that comes before any TCP connection waits for one.
func TestClientWaitsForBackend(t *testing.T) {
	sock, tcp, stop := startServe(t)
	u := dial(t, "unix", sock)
	if _, err := u.Write([]byte("early\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	r := dial(t, "tcp", tcp)
	_ = r.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || got != "early\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	// An unpaired client is closed when serving stops.
	u2 := dial(t, "unix", sock)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, u2)
	if _, err := net.DialTimeout("tcp", tcp, time.Second); err == nil {
		t.Fatal("the TCP listener still accepts after serve returned")
	}
}

// run replaces a stale socket and removes its own on the way out.
func TestRunSocketLifecycle(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "plugin.sock")
	if err := os.WriteFile(sock, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, options{endpoint: sock, proxy: addr}) }()
	var u net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if u, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the socket never accepted: %v", err)
		}
	}
	defer u.Close()
	r := dial(t, "tcp", addr)
	exchange(t, u, r, "through run")
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10s of its cancellation")
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
}

// A TCP address in use is a clear error, and the socket is not left.
func TestRunProxyEndpointInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sock := filepath.Join(t.TempDir(), "plugin.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = run(ctx, options{endpoint: sock, proxy: busy.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "--proxy-endpoint") {
		t.Fatalf("run = %v, want a --proxy-endpoint error", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
}
