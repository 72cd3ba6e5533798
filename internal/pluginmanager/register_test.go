package pluginmanager

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func TestCheckInfo(t *testing.T) {
	handlers := map[string]Handler{
		registerapi.DRAPlugin: &fakeHandler{},
		registerapi.CSIPlugin: &fakeHandler{},
	}
	const path = "/r/x.sock"
	cases := []struct {
		name    string
		info    *registerapi.PluginInfo
		want    Plugin
		wantErr string
	}{
		{
			name: "a DRA driver without an endpoint is reached on its registration socket",
			info: &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "gpu.example.com", SupportedVersions: []string{"v1.DRAPlugin"}},
			want: Plugin{Socket: path, Type: registerapi.DRAPlugin, Name: "gpu.example.com", Endpoint: path, Versions: []string{"v1.DRAPlugin"}},
		},
		{
			name: "a CSI driver names its own endpoint",
			info: &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "hostpath.csi.k8s.io", Endpoint: "/csi/csi.sock", SupportedVersions: []string{"1.0.0"}},
			want: Plugin{Socket: path, Type: registerapi.CSIPlugin, Name: "hostpath.csi.k8s.io", Endpoint: "/csi/csi.sock", Versions: []string{"1.0.0"}},
		},
		{
			name:    "an unknown type names the known ones",
			info:    &registerapi.PluginInfo{Type: "TeapotPlugin", Name: "tea"},
			wantErr: `plugin "tea" at /r/x.sock has type "TeapotPlugin", which no handler takes (known types: CSIPlugin, DRAPlugin)`,
		},
		{
			name:    "an empty type is unknown",
			info:    &registerapi.PluginInfo{Name: "tea"},
			wantErr: `has type "", which no handler takes`,
		},
		{
			name:    "the device plugins' type is not taken here",
			info:    &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "nvidia.com/gpu"},
			wantErr: `has type "DevicePlugin", which no handler takes`,
		},
		{
			name:    "an empty name",
			info:    &registerapi.PluginInfo{Type: registerapi.DRAPlugin, SupportedVersions: []string{"v1.DRAPlugin"}},
			wantErr: "DRAPlugin plugin at /r/x.sock answered GetInfo with an empty name",
		},
		{
			name:    "no answer",
			wantErr: "plugin at /r/x.sock answered GetInfo with nothing",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkInfo(path, tc.info, handlers)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("checkInfo = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("checkInfo = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// fakeConn answers GetInfo with info (or infoErr) and records the
// statuses it is sent; notifyErr fails NotifyRegistrationStatus.
type fakeConn struct {
	info      *registerapi.PluginInfo
	infoErr   error
	notifyErr error

	mu       sync.Mutex
	statuses []*registerapi.RegistrationStatus
	closed   bool
}

func (f *fakeConn) GetInfo(context.Context, *registerapi.InfoRequest, ...grpc.CallOption) (*registerapi.PluginInfo, error) {
	return f.info, f.infoErr
}

func (f *fakeConn) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus, _ ...grpc.CallOption) (*registerapi.RegistrationStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses = append(f.statuses, st)
	return &registerapi.RegistrationStatusResponse{}, f.notifyErr
}

func (f *fakeConn) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func TestRegisterOutcomes(t *testing.T) {
	dra := &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "gpu.example.com", SupportedVersions: []string{"v1.DRAPlugin"}}
	cases := []struct {
		name    string
		conn    *fakeConn
		handler *fakeHandler
		// wantStatus is what the plugin is told; nil if nothing.
		wantStatus *registerapi.RegistrationStatus
		wantErr    string
		wantCalls  []string
	}{
		{
			name:       "registered and told so",
			conn:       &fakeConn{info: dra},
			handler:    &fakeHandler{},
			wantStatus: &registerapi.RegistrationStatus{PluginRegistered: true},
			wantCalls:  []string{"validate gpu.example.com", "register gpu.example.com"},
		},
		{
			name:       "refused by ValidatePlugin, told why",
			conn:       &fakeConn{info: dra},
			handler:    &fakeHandler{validateErr: errors.New("no supported version in [v1.DRAPlugin]")},
			wantStatus: &registerapi.RegistrationStatus{Error: `DRAPlugin plugin "gpu.example.com" at /r/x.sock refused by its handler: no supported version in [v1.DRAPlugin]`},
			wantErr:    "refused by its handler: no supported version",
			wantCalls:  []string{"validate gpu.example.com"},
		},
		{
			name:       "RegisterPlugin failed, told why",
			conn:       &fakeConn{info: dra},
			handler:    &fakeHandler{registerErr: errors.New("driver table full")},
			wantStatus: &registerapi.RegistrationStatus{Error: `registering DRAPlugin plugin "gpu.example.com" at /r/x.sock: driver table full`},
			wantErr:    "driver table full",
			wantCalls:  []string{"validate gpu.example.com", "register gpu.example.com"},
		},
		{
			name:      "GetInfo failed: nothing to tell",
			conn:      &fakeConn{infoErr: errors.New("rpc error: code = Unimplemented")},
			handler:   &fakeHandler{},
			wantErr:   "GetInfo on plugin socket /r/x.sock: rpc error: code = Unimplemented",
			wantCalls: nil,
		},
		{
			name:       "a registration the plugin cannot be told of is undone, as in the kubelet",
			conn:       &fakeConn{info: dra, notifyErr: errors.New("connection reset")},
			handler:    &fakeHandler{},
			wantStatus: &registerapi.RegistrationStatus{PluginRegistered: true},
			wantErr:    "it is registered: NotifyRegistrationStatus: connection reset",
			wantCalls:  []string{"validate gpu.example.com", "register gpu.example.com", "deregister gpu.example.com"},
		},
		{
			name:       "refused, and telling it failed too",
			conn:       &fakeConn{info: dra, notifyErr: errors.New("connection reset")},
			handler:    &fakeHandler{validateErr: errors.New("bad version")},
			wantStatus: &registerapi.RegistrationStatus{Error: `DRAPlugin plugin "gpu.example.com" at /r/x.sock refused by its handler: bad version`},
			wantErr:    "bad version (telling the plugin failed too: NotifyRegistrationStatus: connection reset)",
			wantCalls:  []string{"validate gpu.example.com"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Options{Dir: "/r"})
			if err != nil {
				t.Fatal(err)
			}
			m.dial = func(context.Context, string) (conn, error) { return tc.conn, nil }
			if err := m.AddHandler(registerapi.DRAPlugin, tc.handler); err != nil {
				t.Fatal(err)
			}
			p, err := m.register(t.Context(), "/r/x.sock")
			if tc.wantErr == "" {
				if err != nil || p.Name != "gpu.example.com" || p.Endpoint != "/r/x.sock" {
					t.Fatalf("register = %+v, %v; want gpu.example.com registered", p, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("register error = %v, want one containing %q", err, tc.wantErr)
			}
			var got *registerapi.RegistrationStatus
			if n := len(tc.conn.statuses); n > 1 {
				t.Fatalf("plugin told %d times: %v", n, tc.conn.statuses)
			} else if n == 1 {
				got = tc.conn.statuses[0]
			}
			if (got == nil) != (tc.wantStatus == nil) ||
				got != nil && (got.PluginRegistered != tc.wantStatus.PluginRegistered || got.Error != tc.wantStatus.Error) {
				t.Fatalf("plugin told %v, want %v", got, tc.wantStatus)
			}
			if calls := tc.handler.callList(); !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Fatalf("handler calls = %q, want %q", calls, tc.wantCalls)
			}
			if !tc.conn.closed {
				t.Fatal("connection left open")
			}
		})
	}
}

func TestRegisterDialFailure(t *testing.T) {
	m, err := New(Options{Dir: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	m.dial = func(context.Context, string) (conn, error) { return nil, errors.New("connection refused") }
	_, err = m.register(t.Context(), "/r/x.sock")
	if err == nil || err.Error() != "connecting to plugin socket /r/x.sock: connection refused" {
		t.Fatalf("register error = %v", err)
	}
}

func TestAddHandler(t *testing.T) {
	m, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddHandler("", &fakeHandler{}); err == nil {
		t.Error("a handler with an empty type was taken")
	}
	if err := m.AddHandler(registerapi.DRAPlugin, nil); err == nil {
		t.Error("a nil handler was taken")
	}
	if err := m.AddHandler(registerapi.DRAPlugin, &fakeHandler{}); err != nil {
		t.Fatal(err)
	}
	if err := m.AddHandler(registerapi.DRAPlugin, &fakeHandler{}); err == nil {
		t.Error("a second handler for one type was taken")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.AddHandler(registerapi.CSIPlugin, &fakeHandler{}); err == nil {
		t.Error("a handler added after Run was taken")
	}
	if err := m.Run(t.Context()); err == nil {
		t.Error("Run ran twice")
	}
}
