package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakeHandler records its calls. It refuses a plugin none of whose
// versions is in supported (when set), as the DRA and CSI handlers refuse
// versions they do not speak.
type fakeHandler struct {
	supported   []string
	validateErr error
	registerErr error

	mu    sync.Mutex
	calls []string
}

func (h *fakeHandler) record(call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
}

func (h *fakeHandler) callList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// count returns how many calls were exactly call.
func (h *fakeHandler) count(call string) int {
	n := 0
	for _, c := range h.callList() {
		if c == call {
			n++
		}
	}
	return n
}

func (h *fakeHandler) ValidatePlugin(name, endpoint string, versions []string) error {
	h.record("validate " + name)
	h.mu.Lock()
	err := h.validateErr
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if h.supported != nil && !slices.ContainsFunc(versions, func(v string) bool { return slices.Contains(h.supported, v) }) {
		return fmt.Errorf("none of the versions %q is supported (want one of %q)", versions, h.supported)
	}
	return nil
}

func (h *fakeHandler) RegisterPlugin(_ context.Context, name, endpoint string, versions []string) error {
	h.record("register " + name)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registerErr
}

func (h *fakeHandler) DeRegisterPlugin(_ context.Context, name, endpoint string) {
	h.record("deregister " + name)
}

// testPlugin serves the Registration service on a unix socket, as a
// driver's registrar does. With hang, GetInfo answers only when the call
// ends.
type testPlugin struct {
	registerapi.UnimplementedRegistrationServer
	path string
	info *registerapi.PluginInfo
	hang bool

	srv      *grpc.Server
	ln       *net.UnixListener
	asked    chan struct{} // closed at the first GetInfo
	askOnce  sync.Once
	mu       sync.Mutex
	statuses []*registerapi.RegistrationStatus
}

func startPlugin(t *testing.T, path string, info *registerapi.PluginInfo, hang bool) *testPlugin {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPlugin{path: path, info: info, hang: hang, srv: grpc.NewServer(), ln: ln.(*net.UnixListener), asked: make(chan struct{})}
	registerapi.RegisterRegistrationServer(p.srv, p)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = p.srv.Serve(ln) // ends with stop
	}()
	t.Cleanup(func() {
		p.stop()
		<-served
	})
	return p
}

// replacePlugin restarts old the way a driver that binds under a
// temporary name and renames it over its socket does (berth's own
// unixsocket.Listen): the directory sees the path created again, never
// removed.
func replacePlugin(t *testing.T, old *testPlugin, info *registerapi.PluginInfo) *testPlugin {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(old.path), ".new-"+filepath.Base(old.path))
	p := startPlugin(t, tmp, info, false)
	p.ln.SetUnlinkOnClose(false)
	if err := os.Rename(tmp, old.path); err != nil {
		t.Fatal(err)
	}
	p.path = old.path
	t.Cleanup(func() { os.Remove(p.path) })
	old.ln.SetUnlinkOnClose(false) // its path is the new socket's now
	old.stop()
	return p
}

// stop stops the server; its socket file goes with its listener.
func (p *testPlugin) stop() {
	p.srv.Stop()
}

func (p *testPlugin) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	p.askOnce.Do(func() { close(p.asked) })
	if p.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return p.info, nil
}

func (p *testPlugin) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statuses = append(p.statuses, st)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// told returns the statuses the plugin was sent.
func (p *testPlugin) told() []*registerapi.RegistrationStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.statuses)
}

// toldError reports whether the plugin was told it is not registered,
// with a reason containing want.
func (p *testPlugin) toldError(want string) bool {
	for _, st := range p.told() {
		if !st.PluginRegistered && strings.Contains(st.Error, want) {
			return true
		}
	}
	return false
}

func (p *testPlugin) toldRegistered() int {
	n := 0
	for _, st := range p.told() {
		if st.PluginRegistered {
			n++
		}
	}
	return n
}

// startNoise listens on a unix socket and answers every connection with
// bytes that are not gRPC.
func startNoise(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = c.Write([]byte("HTTP/1.0 418 I'm a teapot\r\n\r\nnot grpc at all\n"))
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
}

// running is a Manager whose Run goroutine a test owns.
type running struct {
	*Manager
	cancel context.CancelFunc
	done   chan error
}

// runManager runs m until the test ends, and checks then that Run
// returned.
func runManager(t *testing.T, m *Manager) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Manager: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends Run and waits for it (generously: it waits only for calls
// whose contexts have ended).
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of its context ending")
	}
}

// waitFor polls cond until it holds; the deadline is only a guard against
// a hung test.
func waitFor(t *testing.T, m *Manager, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s; status: %s", what, dumpStatus(m))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dumpStatus(m *Manager) string {
	var b strings.Builder
	for _, s := range m.Status() {
		fmt.Fprintf(&b, "\n  %s present=%v failures=%d err=%q", s.Path, s.Present, s.Failures, s.LastError)
		if s.Registered != nil {
			fmt.Fprintf(&b, " registered=%+v", *s.Registered)
		}
	}
	return b.String()
}

func socketStatus(m *Manager, path string) (SocketStatus, bool) {
	for _, s := range m.Status() {
		if s.Path == path {
			return s, true
		}
	}
	return SocketStatus{}, false
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// removed reports whether nothing is at path.
func removed(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, os.ErrNotExist)
}
