package deviceplugin

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestStartRegisters(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	fk := startFakeKubelet(t, dir)
	cfg := testConfig(t, dir)
	cfg.PreStartRequired = true
	cfg.GetPreferredAllocationAvailable = true
	p := startPlugin(t, ctx, cfg)

	got := fk.next(t, ctx)
	want := &pluginapi.RegisterRequest{
		Version:      "v1beta1",
		Endpoint:     "widget.sock",
		ResourceName: "example.com/widget",
		Options:      &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true},
	}
	if !proto.Equal(got.req, want) {
		t.Errorf("registration = %v, want %v", got.req, want)
	}
	if !got.endpointExisted {
		t.Error("the plugin registered before its socket existed")
	}
	if c := p.Calls(); c.Registrations != 1 || c.RegisterFailures != 0 {
		t.Errorf("calls = %d registrations, %d failures; want 1, 0", c.Registrations, c.RegisterFailures)
	}
	opts, err := dial(t, p).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(opts, want.Options) {
		t.Errorf("GetDevicePluginOptions = %v, want %v", opts, want.Options)
	}
}

func TestRegisterOverrides(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	fk := startFakeKubelet(t, dir)
	cfg := testConfig(t, dir)
	cfg.ResourceName = "not a resource name"
	cfg.RegisterVersion = "v1alpha1"
	cfg.RegisterEndpoint = "../elsewhere/widget.sock"
	startPlugin(t, ctx, cfg)

	want := &pluginapi.RegisterRequest{
		Version:      "v1alpha1",
		Endpoint:     "../elsewhere/widget.sock",
		ResourceName: "not a resource name",
		Options:      &pluginapi.DevicePluginOptions{},
	}
	if got := fk.next(t, ctx).req; !proto.Equal(got, want) {
		t.Errorf("registration = %v, want %v", got, want)
	}
}

func TestStartFails(t *testing.T) {
	refusal := status.Error(codes.InvalidArgument, "unsupported version")
	tests := []struct {
		name     string
		kubelet  bool
		refusals []error
		check    func(t *testing.T, err error)
	}{{
		name: "no agent",
		check: func(t *testing.T, err error) {
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), kubeletSocketName) {
				t.Errorf("error = %v, want one naming the missing %s", err, kubeletSocketName)
			}
		},
	}, {
		name:     "agent refuses",
		kubelet:  true,
		refusals: []error{refusal},
		check: func(t *testing.T, err error) {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "unsupported version") {
				t.Errorf("error = %v, want the agent's %v", err, refusal)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			dir := tempDir(t)
			if tt.kubelet {
				startFakeKubelet(t, dir, tt.refusals...)
			}
			p, err := New(testConfig(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			err = p.Start(ctx)
			if err == nil {
				p.Stop()
				t.Fatal("Start succeeded")
			}
			tt.check(t, err)
			if c := p.Calls(); c.Registrations != 0 || c.RegisterFailures != 1 || c.LastRegisterError == nil {
				t.Errorf("calls = %+v, want one failed registration", c)
			}
			if fileExists(p.SocketPath()) {
				t.Error("a failed Start left its socket behind")
			}
			if got := pluginGoroutines(ctx); len(got) > 0 {
				t.Errorf("a failed Start left goroutines behind:\n%s", strings.Join(got, "\n\n"))
			}
		})
	}
}

func TestListAndWatch(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	startFakeKubelet(t, dir)
	p := startPlugin(t, ctx, testConfig(t, dir))
	client := dial(t, p)

	var streams []pluginapi.DevicePlugin_ListAndWatchClient
	for range 2 {
		s, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	expect := func(step string, want ...*pluginapi.Device) {
		t.Helper()
		for i, s := range streams {
			got, err := s.Recv()
			if err != nil {
				t.Fatalf("%s: stream %d: %v", step, i, err)
			}
			if w := (&pluginapi.ListAndWatchResponse{Devices: want}); !proto.Equal(got, w) {
				t.Errorf("%s: stream %d got %v, want %v", step, i, got, w)
			}
		}
	}
	numa := func(ids ...int64) *pluginapi.TopologyInfo {
		topo := &pluginapi.TopologyInfo{}
		for _, id := range ids {
			topo.Nodes = append(topo.Nodes, &pluginapi.NUMANode{ID: id})
		}
		return topo
	}

	expect("initial list",
		&pluginapi.Device{ID: "widget-0", Health: pluginapi.Healthy, Topology: numa(0)},
		&pluginapi.Device{ID: "widget-1", Health: pluginapi.Healthy},
		&pluginapi.Device{ID: "widget-2", Health: pluginapi.Healthy, Topology: numa(0, 1)})
	p.SetHealth("widget-1", false)
	expect("widget-1 unhealthy",
		&pluginapi.Device{ID: "widget-0", Health: pluginapi.Healthy, Topology: numa(0)},
		&pluginapi.Device{ID: "widget-1", Health: pluginapi.Unhealthy},
		&pluginapi.Device{ID: "widget-2", Health: pluginapi.Healthy, Topology: numa(0, 1)})
	p.SetDevices([]Device{{ID: "widget-1"}, {ID: "widget-7", NUMA: []int64{1}}})
	expect("new devices",
		&pluginapi.Device{ID: "widget-1", Health: pluginapi.Unhealthy},
		&pluginapi.Device{ID: "widget-7", Health: pluginapi.Healthy, Topology: numa(1)})
	p.SetHealth("widget-1", true)
	expect("widget-1 healthy again",
		&pluginapi.Device{ID: "widget-1", Health: pluginapi.Healthy},
		&pluginapi.Device{ID: "widget-7", Health: pluginapi.Healthy, Topology: numa(1)})

	if n := p.Calls().ListAndWatch; n != 2 {
		t.Errorf("ListAndWatch streams = %d, want 2", n)
	}
}

func TestAllocate(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	startFakeKubelet(t, dir)
	cfg := testConfig(t, dir)
	cfg.Mounts = map[string][]*pluginapi.Mount{
		"widget-1": {{ContainerPath: "/var/widget-1", HostPath: "/srv/widget-1", ReadOnly: true}},
	}
	p := startPlugin(t, ctx, cfg)
	client := dial(t, p)
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"widget-1", "widget-0"}},
		{DevicesIds: []string{"widget-2"}},
	}}
	want := &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{
		Envs:        map[string]string{"WIDGET_DEVICES": "widget-1,widget-0"},
		Annotations: map[string]string{"example.com/widget-ids": "widget-1,widget-0"},
		Devices: []*pluginapi.DeviceSpec{
			{HostPath: "/dev/null", ContainerPath: "/dev/widget-1", Permissions: "rw"},
			{HostPath: "/dev/null", ContainerPath: "/dev/widget-0", Permissions: "rw"},
		},
		Mounts: []*pluginapi.Mount{{ContainerPath: "/var/widget-1", HostPath: "/srv/widget-1", ReadOnly: true}},
	}, {
		Envs:        map[string]string{"WIDGET_DEVICES": "widget-2"},
		Annotations: map[string]string{"example.com/widget-ids": "widget-2"},
		Devices:     []*pluginapi.DeviceSpec{{HostPath: "/dev/null", ContainerPath: "/dev/widget-2", Permissions: "rw"}},
	}}}

	got, err := client.Allocate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("Allocate = %v, want %v", got, want)
	}

	p.FailAllocate("no widgets today")
	_, err = client.Allocate(ctx, req)
	if s, _ := status.FromError(err); s.Code() != codes.Unknown || s.Message() != "no widgets today" {
		t.Errorf("Allocate told to fail: error = %v, want Unknown: no widgets today", err)
	}
	p.FailAllocate("")
	if _, err := client.Allocate(ctx, req); err != nil {
		t.Errorf("Allocate told to succeed again: %v", err)
	}

	p.ShortAllocate(true)
	got, err = client.Allocate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.ContainerResponses); n != 1 {
		t.Errorf("short Allocate answered %d containers, want 1", n)
	}
	p.ShortAllocate(false)

	_, err = client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"widget-9"}},
	}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"widget-9"`) {
		t.Errorf("Allocate of an unknown device: error = %v, want InvalidArgument naming it", err)
	}

	c := p.Calls()
	if len(c.Allocate) != 5 || !proto.Equal(c.Allocate[0], req) {
		t.Errorf("recorded %d Allocate calls, first %v; want 5, first %v", len(c.Allocate), c.Allocate[0], req)
	}
	wantIDs := [][]string{{"widget-1", "widget-0"}, {"widget-2"}}
	if got := c.AllocatedIDs(); len(got) != 9 || !slices.EqualFunc(got[:2], wantIDs, slices.Equal) {
		t.Errorf("AllocatedIDs = %v, want 9 starting with %v", got, wantIDs)
	}
}

func TestOptionalCalls(t *testing.T) {
	preferredReq := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs:   []string{"widget-10", "widget-2", "widget-1", "widget-3"},
		MustIncludeDeviceIDs: []string{"widget-3"},
		AllocationSize:       2,
	}}}
	preStartReq := &pluginapi.PreStartContainerRequest{DevicesIds: []string{"widget-0"}}
	for _, offered := range []bool{true, false} {
		t.Run(map[bool]string{true: "offered", false: "not offered"}[offered], func(t *testing.T) {
			ctx := testContext(t)
			dir := tempDir(t)
			startFakeKubelet(t, dir)
			cfg := testConfig(t, dir)
			cfg.GetPreferredAllocationAvailable = offered
			cfg.PreStartRequired = offered
			p := startPlugin(t, ctx, cfg)
			client := dial(t, p)

			pref, prefErr := client.GetPreferredAllocation(ctx, preferredReq)
			_, preErr := client.PreStartContainer(ctx, preStartReq)
			if offered {
				if prefErr != nil || preErr != nil {
					t.Fatalf("GetPreferredAllocation: %v; PreStartContainer: %v", prefErr, preErr)
				}
				want := []string{"widget-1", "widget-3"}
				if got := pref.ContainerResponses[0].DeviceIDs; !slices.Equal(got, want) {
					t.Errorf("preferred = %v, want %v", got, want)
				}
			} else if status.Code(prefErr) != codes.Unimplemented || status.Code(preErr) != codes.Unimplemented {
				t.Errorf("GetPreferredAllocation: %v; PreStartContainer: %v; want Unimplemented", prefErr, preErr)
			}
			c := p.Calls()
			if len(c.Preferred) != 1 || !proto.Equal(c.Preferred[0], preferredReq) {
				t.Errorf("recorded GetPreferredAllocation calls %v, want [%v]", c.Preferred, preferredReq)
			}
			if len(c.PreStart) != 1 || !proto.Equal(c.PreStart[0], preStartReq) {
				t.Errorf("recorded PreStartContainer calls %v, want [%v]", c.PreStart, preStartReq)
			}
		})
	}
}

// TestReregisters plays the ways a plugin loses its registration.
func TestReregisters(t *testing.T) {
	tests := []struct {
		name    string
		disturb func(t *testing.T, fk *fakeKubelet, p *Plugin) *fakeKubelet
	}{{
		name: "agent restarts",
		disturb: func(t *testing.T, fk *fakeKubelet, p *Plugin) *fakeKubelet {
			fk.stop()
			return startFakeKubelet(t, fk.dir)
		},
	}, {
		name: "agent restarts and removes stale sockets",
		disturb: func(t *testing.T, fk *fakeKubelet, p *Plugin) *fakeKubelet {
			fk.stop()
			if err := os.Remove(p.SocketPath()); err != nil {
				t.Fatal(err)
			}
			return startFakeKubelet(t, fk.dir)
		},
	}, {
		name: "plugin socket removed",
		disturb: func(t *testing.T, fk *fakeKubelet, p *Plugin) *fakeKubelet {
			if err := os.Remove(p.SocketPath()); err != nil {
				t.Fatal(err)
			}
			return fk
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			dir := tempDir(t)
			fk := startFakeKubelet(t, dir)
			p := startPlugin(t, ctx, testConfig(t, dir))
			fk.next(t, ctx)

			fk = tt.disturb(t, fk, p)
			if r := fk.next(t, ctx); !r.endpointExisted || r.req.GetEndpoint() != "widget.sock" {
				t.Errorf("registered again with %v, endpoint there: %v", r.req, r.endpointExisted)
			}
			if err := p.WaitRegistered(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := dial(t, p).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
				t.Errorf("plugin not serving after registering again: %v", err)
			}
		})
	}
}

func TestRetriesFailedReregistration(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	fk := startFakeKubelet(t, dir)
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := testConfig(t, dir)
	cfg.Clock = clk
	cfg.RetryInterval = time.Minute
	p := startPlugin(t, ctx, cfg)

	fk.stop()
	fk = startFakeKubelet(t, dir, status.Error(codes.Unavailable, "not ready yet"))
	if err := p.Wait(ctx, func(c Calls) bool { return c.RegisterFailures == 1 }); err != nil {
		t.Fatal(err)
	}
	if c := p.Calls(); c.Registrations != 1 || status.Code(c.LastRegisterError) != codes.Unavailable {
		t.Errorf("after the refusal: %d registrations, last error %v", c.Registrations, c.LastRegisterError)
	}
	clk.Step(time.Minute)
	if err := p.WaitRegistered(ctx, 2); err != nil {
		t.Fatal(err)
	}
	fk.next(t, ctx)
	fk.next(t, ctx)
}

func TestRestart(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	fk := startFakeKubelet(t, dir)
	p := startPlugin(t, ctx, testConfig(t, dir))
	fk.next(t, ctx)
	stream, err := dial(t, p).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}

	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if r := fk.next(t, ctx); !r.endpointExisted {
		t.Error("registered again before serving again")
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("a ListAndWatch stream survived the restart")
	}
	if n := p.Calls().Registrations; n != 2 {
		t.Errorf("registrations = %d, want 2", n)
	}
	if _, err := dial(t, p).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		t.Errorf("not serving after Restart: %v", err)
	}
}

func TestStopLeavesNothing(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	fk := startFakeKubelet(t, dir)
	p := startPlugin(t, ctx, testConfig(t, dir))
	stream, err := dial(t, p).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}

	p.Stop()
	if _, err := stream.Recv(); err == nil {
		t.Error("a ListAndWatch stream survived Stop")
	}
	fk.stop()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("files left in %s: %v", dir, entries)
	}
	if got := pluginGoroutines(ctx); len(got) > 0 {
		t.Errorf("goroutines left:\n%s", strings.Join(got, "\n\n"))
	}
	p.Stop() // a second Stop is harmless
	if err := p.Restart(ctx); err == nil {
		t.Error("Restart of a stopped plugin succeeded")
	}

	// A stopped plugin starts again.
	fk = startFakeKubelet(t, dir)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fk.next(t, ctx)
	p.Stop()
}

func TestContextEndsPlugin(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	startFakeKubelet(t, dir)
	life, cancel := context.WithCancel(ctx)
	p := startPlugin(t, life, testConfig(t, dir))
	p.life.Lock()
	done := p.done
	p.life.Unlock()

	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the plugin outlived its context")
	}
	if fileExists(p.SocketPath()) {
		t.Error("socket left behind")
	}
	if got := pluginGoroutines(ctx); len(got) > 0 {
		t.Errorf("goroutines left:\n%s", strings.Join(got, "\n\n"))
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	long := "/" + strings.Repeat("d", 100)
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"relative dir", func(c *Config) { c.Dir = "plugins" }, "Dir"},
		{"no socket name", func(c *Config) { c.SocketName = "" }, "SocketName"},
		{"socket name with a directory", func(c *Config) { c.SocketName = "a/b.sock" }, "SocketName"},
		{"socket name of the agent", func(c *Config) { c.SocketName = "kubelet.sock" }, "SocketName"},
		{"socket path too long", func(c *Config) { c.Dir = long }, "Dir"},
		{"negative timeout", func(c *Config) { c.RPCTimeout = -time.Second }, "RPCTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, "/run/dp")
			tt.edit(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.field+":") {
				t.Errorf("New = %v, want an error naming %s", err, tt.field)
			}
		})
	}
	if _, err := New(testConfig(t, filepath.Join("/run", "dp"))); err != nil {
		t.Errorf("New with a good config: %v", err)
	}
}
