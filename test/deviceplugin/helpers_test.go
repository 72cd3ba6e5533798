package deviceplugin

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet is the agent's side of registration: a Registration server
// on <dir>/kubelet.sock that records what it is sent.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir    string
	srv    *grpc.Server
	served chan error
	reqs   chan registration

	mu       sync.Mutex
	refusals []error // answers to the next Register calls, then success
}

type registration struct {
	req *pluginapi.RegisterRequest
	// endpointExisted tells whether the plugin's socket was there when it
	// registered: the agent dials it back at once.
	endpointExisted bool
}

// startFakeKubelet serves Registration in dir until the test ends or stop.
// Its first Register calls get refusals as answers.
func startFakeKubelet(t *testing.T, dir string, refusals ...error) *fakeKubelet {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, kubeletSocketName))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeKubelet{
		dir:      dir,
		srv:      grpc.NewServer(),
		served:   make(chan error, 1),
		reqs:     make(chan registration, 64),
		refusals: refusals,
	}
	pluginapi.RegisterRegistrationServer(f.srv, f)
	go func() { f.served <- f.srv.Serve(ln) }()
	t.Cleanup(f.stop)
	return f
}

func (f *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	_, err := os.Stat(filepath.Join(f.dir, req.GetEndpoint()))
	f.reqs <- registration{req: proto.CloneOf(req), endpointExisted: err == nil}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.refusals) > 0 {
		err := f.refusals[0]
		f.refusals = f.refusals[1:]
		return nil, err
	}
	return &pluginapi.Empty{}, nil
}

// stop stops serving; the listener's close removes kubelet.sock, as an
// exiting agent's would.
func (f *fakeKubelet) stop() {
	if f.srv == nil {
		return
	}
	f.srv.Stop()
	<-f.served
	f.srv = nil
}

// next returns the next registration the fake received.
func (f *fakeKubelet) next(t *testing.T, ctx context.Context) registration {
	t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-ctx.Done():
		t.Fatalf("no registration received: %v", ctx.Err())
		return registration{}
	}
}

// tempDir is a short directory for sockets (sun_path holds 108 bytes,
// t.TempDir's paths can exceed it).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// testContext bounds every wait of a test; its timeout is generous because
// it only ever fires on a failure.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testConfig(t *testing.T, dir string) Config {
	return Config{
		Dir:          dir,
		ResourceName: "example.com/widget",
		SocketName:   "widget.sock",
		Devices:      []Device{{ID: "widget-0", NUMA: []int64{0}}, {ID: "widget-1"}, {ID: "widget-2", NUMA: []int64{0, 1}}},
		Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// startPlugin starts a plugin that the test stops when it ends.
func startPlugin(t *testing.T, ctx context.Context, cfg Config) *Plugin {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// dial is the agent's side of the plugin's socket.
func dial(t *testing.T, p *Plugin) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+p.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// pluginGoroutines returns the stacks of the goroutines that belong to a
// Plugin or its watcher, other than the caller's, waiting until ctx ends
// for those on their way out to finish.
func pluginGoroutines(ctx context.Context) []string {
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var found []string
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 { // the caller
				continue
			}
			if strings.Contains(g, "deviceplugin.(*Plugin)") || strings.Contains(g, "deviceplugin.(*service)") ||
				strings.Contains(g, "fsnotify.") {
				found = append(found, g)
			}
		}
		if len(found) == 0 || ctx.Err() != nil {
			return found
		}
		runtime.Gosched()
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
