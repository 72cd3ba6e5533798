package podresources

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// testTimeout bounds every wait in these tests, so a hang fails instead of
// stalling the run.
const testTimeout = 10 * time.Second

// tempDir returns a fresh directory with a short path (a unix socket path
// must fit in 108 bytes) that is removed when the test ends.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServe runs Serve in the background. The returned stop cancels it and
// returns Serve's error; it also runs at cleanup if the test did not call it.
func startServe(t *testing.T, socketPath string, srv podresourcesapi.PodResourcesListerServer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, socketPath, srv, slog.New(slog.DiscardHandler)) }()
	var stopped bool
	var result error
	stop = func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-done:
		case <-time.After(testTimeout):
			t.Fatalf("Serve did not return within %v of its context ending", testTimeout)
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return stop
}

// dial connects a real gRPC client over the unix socket. Calls wait for the
// server to be ready, with a short reconnect backoff, because Serve binds the
// socket in the background.
func dial(t *testing.T, socketPath string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///pod-resources",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		}),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: testTimeout,
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestServeOverUnixSocket(t *testing.T) {
	// The socket's directory does not exist yet: Serve creates it.
	socketPath := filepath.Join(tempDir(t), "pod-resources", "kubelet.sock")
	gpu0 := devices("nvidia.com/gpu", 0, "gpu0")
	gpu1 := devices("nvidia.com/gpu", 1, "gpu1")
	srv := NewServer(
		fakePods{pod("ml", "train", "uid-train", withInits)},
		&fakeDevices{
			allocated: map[containerKey][]*podresourcesapi.ContainerDevices{
				{"uid-train", "app"}:     {gpu0},
				{"uid-train", "sidecar"}: {gpu1},
			},
			allocatable: []*podresourcesapi.ContainerDevices{gpu0, gpu1},
		},
		nil,
	)
	stop := startServe(t, socketPath, srv)
	client := podresourcesapi.NewPodResourcesListerClient(dial(t, socketPath))
	ctx := callCtx(t)

	train := &podresourcesapi.PodResources{
		Name: "train", Namespace: "ml",
		Containers: []*podresourcesapi.ContainerResources{
			{Name: "sidecar", Devices: []*podresourcesapi.ContainerDevices{gpu1}},
			{Name: "app", Devices: []*podresourcesapi.ContainerDevices{gpu0}},
		},
	}

	list, err := client.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := (&podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{train}}); !proto.Equal(list, want) {
		t.Errorf("List:\n got %v\nwant %v", list, want)
	}

	got, err := client.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodNamespace: "ml", PodName: "train"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if want := (&podresourcesapi.GetPodResourcesResponse{PodResources: train}); !proto.Equal(got, want) {
		t.Errorf("Get:\n got %v\nwant %v", got, want)
	}
	_, err = client.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodNamespace: "ml", PodName: "gone"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Get of a missing pod: err = %v, want NotFound", err)
	}

	alloc, err := client.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatalf("GetAllocatableResources: %v", err)
	}
	if want := (&podresourcesapi.AllocatableResourcesResponse{Devices: []*podresourcesapi.ContainerDevices{gpu0, gpu1}}); !proto.Equal(alloc, want) {
		t.Errorf("GetAllocatableResources:\n got %v\nwant %v", alloc, want)
	}

	fi, err := os.Lstat(socketPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != socketMode {
		t.Errorf("socket mode = %v, want a socket with %v", fi.Mode(), fs.FileMode(socketMode))
	}
	di, err := os.Stat(filepath.Dir(socketPath))
	if err != nil {
		t.Fatal(err)
	}
	// The umask may only take bits away from the kubelet's 0750.
	if perm := di.Mode().Perm(); perm&^socketDirMode != 0 || perm&0o700 != 0o700 {
		t.Errorf("socket directory mode = %v, want within %v", perm, fs.FileMode(socketDirMode))
	}
	if entries, _ := os.ReadDir(filepath.Dir(socketPath)); len(entries) != 1 {
		t.Errorf("socket directory holds %d entries, want only the socket", len(entries))
	}

	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Lstat(socketPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still present after Serve returned: %v", err)
	}
}

func TestServeReplacesStaleSocket(t *testing.T) {
	socketPath := filepath.Join(tempDir(t), "kubelet.sock")
	// What a killed run leaves behind: a socket file nobody listens on.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketPath, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()

	stop := startServe(t, socketPath, NewServer(fakePods{}, &fakeDevices{}, nil))
	if _, err := podresourcesapi.NewPodResourcesListerClient(dial(t, socketPath)).List(callCtx(t), &podresourcesapi.ListPodResourcesRequest{}); err != nil {
		t.Fatalf("List: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Lstat(socketPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still present after Serve returned: %v", err)
	}
}

func TestServeRefusesNonSocket(t *testing.T) {
	socketPath := filepath.Join(tempDir(t), "kubelet.sock")
	if err := os.WriteFile(socketPath, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Serve(context.Background(), socketPath, NewServer(fakePods{}, &fakeDevices{}, nil), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), socketPath) || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Serve = %v, want an error naming %s as not a socket", err, socketPath)
	}
	if b, err := os.ReadFile(socketPath); err != nil || string(b) != "not a socket" {
		t.Errorf("the file in the way was changed: %q, %v", b, err)
	}
}

// blockingPods holds GetPods until released, to keep a call in flight.
type blockingPods struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingPods) GetPods() []*v1.Pod {
	close(b.entered)
	<-b.release
	return fakePods{pod("default", "web", "uid-web")}
}

func (b *blockingPods) GetPodByName(string, string) (*v1.Pod, bool) { return nil, false }

func TestServeFinishesCallsInFlight(t *testing.T) {
	socketPath := filepath.Join(tempDir(t), "kubelet.sock")
	pods := &blockingPods{entered: make(chan struct{}), release: make(chan struct{})}
	stop := startServe(t, socketPath, NewServer(pods, &fakeDevices{}, nil))
	conn := dial(t, socketPath)
	client := podresourcesapi.NewPodResourcesListerClient(conn)
	ctx := callCtx(t)

	type result struct {
		resp *podresourcesapi.ListPodResourcesResponse
		err  error
	}
	listed := make(chan result, 1)
	go func() {
		resp, err := client.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
		listed <- result{resp, err}
	}()
	select {
	case <-pods.entered:
	case <-time.After(testTimeout):
		t.Fatal("List never reached the server")
	}

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// The graceful stop tells the client to go away (the connection leaves
	// Ready) while List is still held in the server: only then let it finish.
	if !conn.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatal("the client never heard of the shutdown")
	}
	close(pods.release)

	var r result
	select {
	case r = <-listed:
	case <-time.After(testTimeout):
		t.Fatal("List in flight at shutdown never returned")
	}
	if r.err != nil || len(r.resp.GetPodResources()) != 1 {
		t.Errorf("List in flight at shutdown = %v, %v; want its answer", r.resp, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
