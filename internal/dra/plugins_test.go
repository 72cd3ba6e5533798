package dra

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"
	v1 "k8s.io/api/core/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/pluginmanager"
)

func TestValidatePlugin(t *testing.T) {
	p := NewPlugins(nil, 0)
	tests := []struct {
		name     string
		versions []string
		wantErr  string
	}{
		{name: "gpu.example.com", versions: []string{"v1.DRAPlugin"}},
		{name: "gpu.example.com", versions: []string{"v1beta1.DRAPlugin"}},
		{name: "gpu.example.com", versions: []string{"v1alpha3", "v1alpha4.DRAPlugin"},
			wantErr: `invalid supported gRPC versions of DRA driver plugin gpu.example.com at endpoint /x.sock: none of services supported by the plugin (["v1alpha3" "v1alpha4.DRAPlugin"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`},
		{name: "gpu.example.com", wantErr: "invalid supported gRPC versions of DRA driver plugin gpu.example.com at endpoint /x.sock: empty list of supported gRPC services (aka supported versions)"},
		{name: "", versions: []string{"v1.DRAPlugin"}, wantErr: "DRA driver plugin at endpoint /x.sock: DRA driver name is empty"},
	}
	for _, tt := range tests {
		if err := p.ValidatePlugin(tt.name, "/x.sock", tt.versions); errString(err) != tt.wantErr {
			t.Errorf("ValidatePlugin(%q, %q) = %q, want %q", tt.name, tt.versions, errString(err), tt.wantErr)
		}
	}
}

// TestV1beta1Driver: a driver offering only v1beta1 is called through it.
func TestV1beta1Driver(t *testing.T) {
	pod := withContainers(testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil), []string{"c/nic"})
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1")), 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver, "v1beta1.DRAPlugin")
	register(t, e.plugins, d)
	if got := registered(e.plugins, gpuDriver).service; got != "v1beta1.DRAPlugin" {
		t.Fatalf("service %q", got)
	}
	if err := e.prepare(pod); err != nil {
		t.Fatal(err)
	}
	if got := e.cdi(pod, 0); !reflect.DeepEqual(got, []string{cdiID(gpuDriver, "c1", "nic")}) {
		t.Errorf("devices %q", got)
	}
	if err := e.unprepare(pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"c1"}, []string{"c1"})
}

// TestReRegistration: a driver's second instance registered at another
// endpoint (a rolling update) takes the calls while the first stays
// connected; the new instance gone (a failed update), the old one serves
// again; the old one gone, the new one stays; the same endpoint registered
// again replaces its connection; the last instance gone, the driver is not
// registered.
func TestReRegistration(t *testing.T) {
	p1 := testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil)
	p2 := testPod("p2", []v1.PodResourceClaim{named("c", "c2")}, nil)
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1"), testClaim("c2", "u-c2", []string{gpuDriver}, "p2")), 0)
	dir := shortTempDir(t)
	old := startDriver(t, dir, "old.sock", gpuDriver)
	register(t, e.plugins, old)
	oldConn := registered(e.plugins, gpuDriver).conn
	cur := startDriver(t, dir, "new.sock", gpuDriver)
	register(t, e.plugins, cur)
	if s := oldConn.GetState(); s == connectivity.Shutdown {
		t.Errorf("the old instance's connection was closed when the new one registered")
	}
	if err := e.prepare(p1); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, old, nil, nil)
	wantCalls(t, cur, []string{"c1"}, nil)

	// The new instance fails: the old one is the driver again.
	ctx := context.Background()
	curConn := registered(e.plugins, gpuDriver).conn
	e.plugins.DeRegisterPlugin(ctx, gpuDriver, cur.sock)
	if s := curConn.GetState(); s != connectivity.Shutdown {
		t.Errorf("forgotten connection is %s, want closed", s)
	}
	if err := e.prepare(p2); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, old, []string{"c2"}, nil)

	// A new instance again, then the old one goes: the new one stays.
	register(t, e.plugins, cur)
	e.plugins.DeRegisterPlugin(ctx, gpuDriver, old.sock)
	if s := oldConn.GetState(); s != connectivity.Shutdown {
		t.Errorf("the old instance's connection is %s after it went, want closed", s)
	}
	if got := e.plugins.Registered(); !reflect.DeepEqual(got, []string{gpuDriver}) {
		t.Fatalf("registered after the old instance went: %q", got)
	}
	if err := e.unprepare(p1); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, cur, []string{"c1"}, []string{"c1"})

	// The same endpoint registered again: one instance, a new connection.
	curConn = registered(e.plugins, gpuDriver).conn
	register(t, e.plugins, cur)
	if s := curConn.GetState(); s != connectivity.Shutdown {
		t.Errorf("the replaced connection of the same endpoint is %s, want closed", s)
	}
	e.plugins.DeRegisterPlugin(ctx, gpuDriver, cur.sock)
	err := e.unprepare(p2)
	if err == nil || !strings.Contains(err.Error(), "ResourceClaims [c2]: DRA driver gpu.example.com is not registered") {
		t.Fatalf("unprepare with every instance gone: %v", err)
	}
	register(t, e.plugins, cur)
	if err := e.unprepare(p2); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, cur, []string{"c1"}, []string{"c1", "c2"})
}

// TestRegisterDeadEndpoint: an endpoint nobody serves is refused at
// registration, within the dial timeout.
func TestRegisterDeadEndpoint(t *testing.T) {
	p := NewPlugins(testLog(t), 100*time.Millisecond)
	sock := filepath.Join(shortTempDir(t), "nobody.sock")
	err := p.RegisterPlugin(context.Background(), gpuDriver, sock, []string{"v1.DRAPlugin"})
	if err == nil || !strings.Contains(err.Error(), "connect to DRA driver gpu.example.com plugin at endpoint "+sock) {
		t.Fatalf("error %v", err)
	}
	if len(p.Registered()) != 0 {
		t.Errorf("registered: %q", p.Registered())
	}
}

// TestThroughPluginManager: a driver whose registration socket appears in
// the plugins_registry directory is registered by the plugin manager with
// this package's Handler and prepares a pod; when its socket goes, it is
// forgotten.
func TestThroughPluginManager(t *testing.T) {
	reg := shortTempDir(t)
	pm, err := pluginmanager.New(pluginmanager.Options{Dir: reg, Clock: clocktesting.NewFakeClock(time.Now()), Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1")), 0)
	if err := pm.AddHandler(registerapi.DRAPlugin, e.plugins); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- pm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && err != context.Canceled {
			t.Error(err)
		}
	})

	d := startDriver(t, reg, "gpu.example.com-reg.sock", gpuDriver, "v1beta1.DRAPlugin", "v1.DRAPlugin")
	waitFor(t, "the driver registered", func() bool { return slices.Equal(e.plugins.Registered(), []string{gpuDriver}) })
	waitFor(t, "the driver told it is registered", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.statuses) == 1 && d.statuses[0].PluginRegistered
	})
	if got := registered(e.plugins, gpuDriver).service; got != "v1.DRAPlugin" {
		t.Errorf("service %q, want v1.DRAPlugin", got)
	}
	pod := withContainers(testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil), []string{"c/gpu"})
	if err := e.prepare(pod); err != nil {
		t.Fatal(err)
	}
	if got := e.cdi(pod, 0); !reflect.DeepEqual(got, []string{cdiID(gpuDriver, "c1", "gpu")}) {
		t.Errorf("devices %q", got)
	}

	d.srv.Stop() // its socket goes with its listener
	if _, err := os.Stat(d.sock); !os.IsNotExist(err) {
		if err := os.Remove(d.sock); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the driver forgotten", func() bool { return len(e.plugins.Registered()) == 0 })
}

// waitFor polls cond with a generous deadline: it is no timed assertion,
// only a bound on a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// registered is the plugin recorded for a driver.
// registered is the driver's instance that takes its calls.
func registered(p *Plugins, name string) plugin {
	p.mu.Lock()
	defer p.mu.Unlock()
	instances := p.drivers[name]
	return *instances[len(instances)-1]
}
