package pluginmanager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// newTestManager returns a manager of a temp dir with a DRA handler that
// speaks v1.DRAPlugin and a CSI handler that speaks 1.0.0. Its clock is
// fake and never stepped unless the test does: a failed plugin is then
// retried only when its socket changes.
func newTestManager(t *testing.T, opts Options) (*Manager, *fakeHandler, *fakeHandler, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Clock, opts.Log = clk, testLog(t)
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	dra := &fakeHandler{supported: []string{"v1.DRAPlugin"}}
	csi := &fakeHandler{supported: []string{"1.0.0"}}
	if err := m.AddHandler(registerapi.DRAPlugin, dra); err != nil {
		t.Fatal(err)
	}
	if err := m.AddHandler(registerapi.CSIPlugin, csi); err != nil {
		t.Fatal(err)
	}
	return m, dra, csi, clk
}

// filterCalls keeps the calls about one plugin.
func filterCalls(calls []string, name string) []string {
	var out []string
	for _, c := range calls {
		if strings.HasSuffix(c, " "+name) {
			out = append(out, c)
		}
	}
	return out
}

var errTableFull = errors.New("driver table full")

func draInfo(name string) *registerapi.PluginInfo {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: name, SupportedVersions: []string{"v1beta1.DRAPlugin", "v1.DRAPlugin"}}
}

func registeredAs(m *Manager, path, name string) bool {
	s, ok := socketStatus(m, path)
	return ok && s.Registered != nil && s.Registered.Name == name
}

// TestWatcherWithRealPlugins runs the manager against real Registration
// servers on unix sockets: well-behaved ones (present at start and
// later), one of an unknown type, one with garbage versions, one that is
// not gRPC, one restarted and one removed.
func TestWatcherWithRealPlugins(t *testing.T) {
	dir := t.TempDir()
	// The noise socket fails at the dial timeout.
	m, dra, csi, _ := newTestManager(t, Options{Dir: dir, DialTimeout: 3 * time.Second})
	sock := func(name string) string { return filepath.Join(dir, name) }

	// Present before the manager starts, with other files it must ignore.
	early := startPlugin(t, sock("early.sock"), draInfo("early.example.com"), false)
	startPlugin(t, sock(".hidden.sock"), draInfo("hidden.example.com"), false)
	if err := os.WriteFile(sock("notes.txt"), []byte("not a socket"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sock("subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	runManager(t, m)

	// Then, while it runs.
	csiInfo := &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "hostpath.csi.k8s.io", Endpoint: "/var/lib/kubelet/plugins/csi-hostpath/csi.sock", SupportedVersions: []string{"1.0.0"}}
	hostpath := startPlugin(t, sock("hostpath-reg.sock"), csiInfo, false)
	unknown := startPlugin(t, sock("teapot.sock"), &registerapi.PluginInfo{Type: "TeapotPlugin", Name: "teapot.example.com"}, false)
	garbage := startPlugin(t, sock("garbage.sock"), &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "garbage.example.com", SupportedVersions: []string{"", "v1;DROP TABLE", "🙃"}}, false)
	nameless := startPlugin(t, sock("nameless.sock"), &registerapi.PluginInfo{Type: registerapi.DRAPlugin, SupportedVersions: []string{"v1.DRAPlugin"}}, false)
	startNoise(t, sock("noise.sock"))

	waitFor(t, m, "early.sock registered", func() bool { return registeredAs(m, early.path, "early.example.com") && early.toldRegistered() == 1 })
	waitFor(t, m, "the CSI driver registered", func() bool {
		return registeredAs(m, hostpath.path, "hostpath.csi.k8s.io") && hostpath.toldRegistered() == 1
	})
	if s, _ := socketStatus(m, hostpath.path); s.Registered.Endpoint != csiInfo.Endpoint || s.Registered.Type != registerapi.CSIPlugin {
		t.Errorf("CSI driver registered as %+v, want its own endpoint %s", *s.Registered, csiInfo.Endpoint)
	}
	checkRefusals(t, m, dra, unknown, garbage, nameless)
	waitFor(t, m, "the noise socket failed", func() bool {
		s, ok := socketStatus(m, sock("noise.sock"))
		return ok && s.Failures >= 1 && s.Registered == nil
	})
	for _, ignoredPath := range []string{sock(".hidden.sock"), sock("notes.txt"), sock("subdir")} {
		if s, ok := socketStatus(m, ignoredPath); ok {
			t.Errorf("%s is not a plugin socket but has status %+v", ignoredPath, s)
		}
	}
	if dra.count("register hidden.example.com") != 0 {
		t.Errorf("DRA handler calls %q: registered a hidden socket", dra.callList())
	}
	checkRestarts(t, m, dra, early)

	// A removed driver.
	hostpath.stop()
	waitFor(t, m, "the removed driver deregistered", func() bool { return csi.count("deregister hostpath.csi.k8s.io") == 1 })
	waitFor(t, m, "the removed driver forgotten", func() bool { _, ok := socketStatus(m, hostpath.path); return !ok })
	if !removed(hostpath.path) {
		t.Fatal("the test server left its socket")
	}

	// The unknown-type plugin is fixed and restarted: tried again at once,
	// with no back-off to wait for (the clock never moved).
	unknown.stop()
	fixed := startPlugin(t, unknown.path, draInfo("teapot.example.com"), false)
	waitFor(t, m, "the fixed plugin registered on its next change", func() bool {
		return fixed.toldRegistered() == 1 && registeredAs(m, fixed.path, "teapot.example.com")
	})
	if s, _ := socketStatus(m, fixed.path); s.Failures != 0 || s.LastError != "" {
		t.Errorf("fixed plugin status %+v, want its failures forgotten", s)
	}
	if n := len(garbage.told()); n != 1 {
		t.Errorf("garbage plugin told %d times with the clock stopped, want 1 (no retry before its back-off)", n)
	}
}

// TestHangingPluginBlocksNoOther: a plugin whose GetInfo never answers
// does not hold back the registration of another, and Run still returns
// when its context ends.
func TestHangingPluginBlocksNoOther(t *testing.T) {
	// A GetInfo timeout longer than the test: the hanging call is in flight
	// all along, and only Run's end cancels it.
	m, dra, _, _ := newTestManager(t, Options{GetInfoTimeout: time.Hour})
	r := runManager(t, m)
	hang := startPlugin(t, filepath.Join(m.Dir(), "hang.sock"), draInfo("hang.example.com"), true)
	select {
	case <-hang.asked:
	case <-time.After(time.Minute):
		t.Fatalf("the hanging plugin was never asked GetInfo; status: %s", dumpStatus(m))
	}
	good := startPlugin(t, filepath.Join(m.Dir(), "good.sock"), draInfo("good.example.com"), false)
	waitFor(t, m, "the good plugin registered while the other hangs", func() bool {
		return good.toldRegistered() == 1 && registeredAs(m, good.path, "good.example.com")
	})
	if s, _ := socketStatus(m, hang.path); s.Registered != nil || s.Failures != 0 {
		t.Fatalf("hanging plugin status %+v, want its registration still in flight", s)
	}
	r.stop(t)
	if got := dra.count("register hang.example.com"); got != 0 {
		t.Errorf("hanging plugin registered %d times", got)
	}
}

// TestHangingPluginTimesOut: a GetInfo that does not answer in time fails
// with a clear error, and is retried after the back-off.
func TestHangingPluginTimesOut(t *testing.T) {
	m, _, _, clk := newTestManager(t, Options{GetInfoTimeout: 100 * time.Millisecond})
	runManager(t, m)
	hang := startPlugin(t, filepath.Join(m.Dir(), "hang.sock"), draInfo("hang.example.com"), true)
	waitFor(t, m, "the hanging plugin's first failure", func() bool {
		s, _ := socketStatus(m, hang.path)
		return s.Failures == 1
	})
	s, _ := socketStatus(m, hang.path)
	if want := "GetInfo on plugin socket " + hang.path + ": rpc error: code = DeadlineExceeded"; len(s.LastError) < len(want) || s.LastError[:len(want)] != want {
		t.Fatalf("hanging plugin's error = %q, want it to start with %q", s.LastError, want)
	}
	if len(hang.told()) != 0 {
		t.Errorf("hanging plugin told %v; a plugin that does not answer GetInfo is told nothing, as in the kubelet", hang.told())
	}
	// The retry waits on the clock; step past it once the timer is set.
	waitFor(t, m, "the retry timer", clk.HasWaiters)
	clk.Step(initialRetryDelay)
	waitFor(t, m, "the retry's failure", func() bool {
		s, _ := socketStatus(m, hang.path)
		return s.Failures == 2
	})
}

// TestFailedRegistrationRetriedAfterBackOff: a plugin refused by its
// handler's RegisterPlugin is told why and tried again after the back-off;
// once the handler takes it, it is registered.
func TestFailedRegistrationRetriedAfterBackOff(t *testing.T) {
	m, err := New(Options{Dir: t.TempDir(), Clock: clocktesting.NewFakeClock(t0), Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	clk := m.clk.(*clocktesting.FakeClock)
	h := &fakeHandler{registerErr: errTableFull}
	if err := m.AddHandler(registerapi.DRAPlugin, h); err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	p := startPlugin(t, filepath.Join(m.Dir(), "p.sock"), draInfo("p.example.com"), false)
	waitFor(t, m, "the refusal told", func() bool { return p.toldError("registering DRAPlugin plugin \"p.example.com\"") })
	h.mu.Lock()
	h.registerErr = nil
	h.mu.Unlock()
	waitFor(t, m, "the retry timer", clk.HasWaiters)
	clk.Step(initialRetryDelay)
	waitFor(t, m, "registered on retry", func() bool { return p.toldRegistered() == 1 && registeredAs(m, p.path, "p.example.com") })
}

// TestSocketsInNewDirectory: Run creates the directory, as the kubelet
// does.
func TestSocketsInNewDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "lib", "kubelet", "plugins_registry")
	m, dra, _, _ := newTestManager(t, Options{Dir: dir})
	runManager(t, m)
	waitFor(t, m, "the directory", func() bool { fi, err := os.Stat(dir); return err == nil && fi.IsDir() })
	p := startPlugin(t, filepath.Join(dir, "a.sock"), draInfo("a.example.com"), false)
	waitFor(t, m, "registered", func() bool { return p.toldRegistered() == 1 })
	if dra.count("register a.example.com") != 1 {
		t.Fatalf("handler calls %q", dra.callList())
	}
}

// panicHandler panics in RegisterPlugin.
type panicHandler struct{ fakeHandler }

func (h *panicHandler) RegisterPlugin(context.Context, string, string, []string) error {
	panic("handler bug")
}

// TestHandlerPanicFailsOnlyItsPlugin: a handler that panics fails the
// registration of its plugin, not the manager.
func TestHandlerPanicFailsOnlyItsPlugin(t *testing.T) {
	m, err := New(Options{Dir: t.TempDir(), Clock: clocktesting.NewFakeClock(t0), Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	csi := &fakeHandler{}
	if err := m.AddHandler(registerapi.DRAPlugin, &panicHandler{}); err != nil {
		t.Fatal(err)
	}
	if err := m.AddHandler(registerapi.CSIPlugin, csi); err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	bad := startPlugin(t, filepath.Join(m.Dir(), "bad.sock"), draInfo("bad.example.com"), false)
	waitFor(t, m, "the panic recorded", func() bool {
		s, _ := socketStatus(m, bad.path)
		return s.LastError == "plugin handler panicked: handler bug"
	})
	good := startPlugin(t, filepath.Join(m.Dir(), "good.sock"),
		&registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "good.csi", SupportedVersions: []string{"1.0.0"}}, false)
	waitFor(t, m, "another plugin registered after the panic", func() bool { return good.toldRegistered() == 1 })
}

// TestDialStaleSocket: a socket file nobody listens on (a driver killed
// without removing it) fails the dial with the reason, at its timeout.
func TestDialStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	c, err := dialUnix(ctx, path)
	if err == nil {
		c.Close()
		t.Fatal("dialed a stale socket")
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("dial error = %v, want the refusal", err)
	}
}

// checkRefusals: each refused plugin is told why, once (the clock does not
// move), and is neither registered nor told it is.
func checkRefusals(t *testing.T, m *Manager, dra *fakeHandler, unknown, garbage, nameless *testPlugin) {
	t.Helper()
	waitFor(t, m, "the unknown type refused and told why", func() bool {
		return unknown.toldError(`has type "TeapotPlugin", which no handler takes (known types: CSIPlugin, DRAPlugin)`)
	})
	waitFor(t, m, "the garbage versions refused and told why", func() bool {
		return garbage.toldError(`refused by its handler: none of the versions ["" "v1;DROP TABLE" "🙃"] is supported`)
	})
	waitFor(t, m, "the nameless plugin refused and told why", func() bool { return nameless.toldError("answered GetInfo with an empty name") })
	for _, p := range []*testPlugin{unknown, garbage, nameless} {
		// The plugin is told before the failure is recorded.
		waitFor(t, m, p.path+"'s failure recorded", func() bool {
			s, _ := socketStatus(m, p.path)
			return s.Failures == 1
		})
		if s, _ := socketStatus(m, p.path); s.Registered != nil || s.LastError == "" {
			t.Errorf("%s: status %+v, want a failure with its reason and not registered", p.path, s)
		}
		if n := p.toldRegistered(); n != 0 {
			t.Errorf("%s told it is registered %d times", p.path, n)
		}
	}
	if dra.count("register garbage.example.com") != 0 {
		t.Errorf("DRA handler calls %q: registered a refused plugin", dra.callList())
	}
}

// checkRestarts restarts early twice: removed and bound again, then bound
// anew and renamed over its socket. Each time the old registration is
// undone and the new socket registered.
func checkRestarts(t *testing.T, m *Manager, dra *fakeHandler, early *testPlugin) {
	t.Helper()
	// A driver restart: the same path, a new socket file.
	early.stop()
	early2 := startPlugin(t, early.path, draInfo("early.example.com"), false)
	waitFor(t, m, "the restarted driver re-registered", func() bool {
		return early2.toldRegistered() == 1 && registeredAs(m, early2.path, "early.example.com")
	})
	if got := dra.count("deregister early.example.com"); got != 1 {
		t.Errorf("restarted driver deregistered %d times, want 1 (calls %q)", got, dra.callList())
	}
	if got := dra.count("register early.example.com"); got != 2 {
		t.Errorf("restarted driver registered %d times, want 2 (calls %q)", got, dra.callList())
	}

	// A driver restart that renames its new socket over the old one: the
	// directory sees only a create, of a new socket file.
	early3 := replacePlugin(t, early2, draInfo("early.example.com"))
	waitFor(t, m, "the driver renamed over its socket re-registered", func() bool {
		return early3.toldRegistered() == 1 && registeredAs(m, early3.path, "early.example.com")
	})
	if got, want := dra.callList(), []string{
		"validate early.example.com", "register early.example.com", "deregister early.example.com",
		"validate early.example.com", "register early.example.com", "deregister early.example.com",
		"validate early.example.com", "register early.example.com",
	}; !slices.Equal(filterCalls(got, "early.example.com"), want) {
		t.Errorf("calls for the restarted driver = %q, want %q", filterCalls(got, "early.example.com"), want)
	}
}
