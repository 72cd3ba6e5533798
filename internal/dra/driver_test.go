package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// How a testDriver answers NodePrepareResources / NodeUnprepareResources.
const (
	modeGood    = "good"    // devices for every claim
	modeFail    = "fail"    // an error for every claim
	modeHang    = "hang"    // no answer until the call ends
	modeOmit    = "omit"    // an empty answer: every claim skipped
	modeUnknown = "unknown" // an answer about a claim not asked for
	modeBlock   = "block"   // good, once release is closed
)

// testDriver is a DRA driver's node plugin: the v1 DRAPlugin service (and
// v1beta1 where asked) and the registration service, on one unix socket,
// as the kubelet allows when the registration names no other endpoint.
type testDriver struct {
	drapb.UnimplementedDRAPluginServer
	registerapi.UnimplementedRegistrationServer
	name     string
	sock     string
	versions []string

	mu         sync.Mutex
	prepMode   string
	unprepMode string
	prepared   []string // claim names, one per claim per call
	unprepared []string
	statuses   []*registerapi.RegistrationStatus

	called  chan struct{} // receives at each NodePrepareResources
	release chan struct{}
	srv     *grpc.Server
}

// shortTempDir is a directory for sockets, whose paths must stay under
// 108 bytes: t.TempDir's can be longer.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startDriver serves a driver at dir/<file>; versions are the services it
// offers (v1 alone by default).
func startDriver(t *testing.T, dir, file, name string, versions ...string) *testDriver {
	t.Helper()
	if versions == nil {
		versions = []string{drapb.DRAPluginService}
	}
	d := &testDriver{
		name: name, sock: filepath.Join(dir, file), versions: versions,
		prepMode: modeGood, unprepMode: modeGood,
		called: make(chan struct{}, 16), release: make(chan struct{}),
		srv: grpc.NewServer(),
	}
	ln, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(versions, drapb.DRAPluginService) {
		drapb.RegisterDRAPluginServer(d.srv, d)
	}
	if slices.Contains(versions, drapbv1beta1.DRAPluginService) {
		drapbv1beta1.RegisterDRAPluginServer(d.srv, v1beta1Driver{d: d})
	}
	registerapi.RegisterRegistrationServer(d.srv, d)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = d.srv.Serve(ln) // ends with Stop
	}()
	t.Cleanup(func() {
		d.srv.Stop()
		<-served
	})
	return d
}

func (d *testDriver) setModes(prep, unprep string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prepMode, d.unprepMode = prep, unprep
}

func (d *testDriver) calls() (prepared, unprepared []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.prepared), slices.Clone(d.unprepared)
}

// cdiID is the CDI device the test driver returns for a claim's request.
func cdiID(driver, claim, request string) string {
	return fmt.Sprintf("%s/%s=%s", driver, request, claim)
}

func (d *testDriver) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	d.mu.Lock()
	mode := d.prepMode
	for _, c := range req.Claims {
		d.prepared = append(d.prepared, c.Name)
	}
	d.mu.Unlock()
	d.called <- struct{}{}
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	switch mode {
	case modeHang:
		<-ctx.Done()
		return nil, ctx.Err()
	case modeBlock:
		select {
		case <-d.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case modeOmit:
		return resp, nil
	case modeUnknown:
		resp.Claims["not-asked-for"] = &drapb.NodePrepareResourceResponse{}
	}
	for _, c := range req.Claims {
		if mode == modeFail {
			resp.Claims[c.Uid] = &drapb.NodePrepareResourceResponse{Error: "device " + c.Name + " is on fire"}
			continue
		}
		r := &drapb.NodePrepareResourceResponse{}
		for _, request := range []string{"gpu", "nic"} {
			r.Devices = append(r.Devices, &drapb.Device{
				RequestNames: []string{request}, PoolName: "pool", DeviceName: request + "-" + c.Name,
				CdiDeviceIds: []string{cdiID(d.name, c.Name, request)},
			})
		}
		resp.Claims[c.Uid] = r
	}
	return resp, nil
}

func (d *testDriver) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	d.mu.Lock()
	mode := d.unprepMode
	for _, c := range req.Claims {
		d.unprepared = append(d.unprepared, c.Name)
	}
	d.mu.Unlock()
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	switch mode {
	case modeHang:
		<-ctx.Done()
		return nil, ctx.Err()
	case modeOmit:
		return resp, nil
	}
	for _, c := range req.Claims {
		r := &drapb.NodeUnprepareResourceResponse{}
		if mode == modeFail {
			r.Error = "device " + c.Name + " is stuck"
		}
		resp.Claims[c.Uid] = r
	}
	return resp, nil
}

func (d *testDriver) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: d.name, SupportedVersions: d.versions}, nil
}

func (d *testDriver) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.statuses = append(d.statuses, s)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// v1beta1Driver serves a testDriver as the v1beta1 service.
type v1beta1Driver struct {
	drapbv1beta1.UnimplementedDRAPluginServer
	d *testDriver
}

func (w v1beta1Driver) NodePrepareResources(ctx context.Context, req *drapbv1beta1.NodePrepareResourcesRequest) (*drapbv1beta1.NodePrepareResourcesResponse, error) {
	var in drapb.NodePrepareResourcesRequest
	if err := drapbv1beta1.Convert_v1beta1_NodePrepareResourcesRequest_To_v1_NodePrepareResourcesRequest(req, &in, nil); err != nil {
		return nil, err
	}
	resp, err := w.d.NodePrepareResources(ctx, &in)
	if err != nil {
		return nil, err
	}
	var out drapbv1beta1.NodePrepareResourcesResponse
	return &out, drapbv1beta1.Convert_v1_NodePrepareResourcesResponse_To_v1beta1_NodePrepareResourcesResponse(resp, &out, nil)
}

func (w v1beta1Driver) NodeUnprepareResources(ctx context.Context, req *drapbv1beta1.NodeUnprepareResourcesRequest) (*drapbv1beta1.NodeUnprepareResourcesResponse, error) {
	var in drapb.NodeUnprepareResourcesRequest
	if err := drapbv1beta1.Convert_v1beta1_NodeUnprepareResourcesRequest_To_v1_NodeUnprepareResourcesRequest(req, &in, nil); err != nil {
		return nil, err
	}
	resp, err := w.d.NodeUnprepareResources(ctx, &in)
	if err != nil {
		return nil, err
	}
	var out drapbv1beta1.NodeUnprepareResourcesResponse
	return &out, drapbv1beta1.Convert_v1_NodeUnprepareResourcesResponse_To_v1beta1_NodeUnprepareResourcesResponse(resp, &out, nil)
}

// fakeClaims is the API server's ResourceClaims.
type fakeClaims struct {
	mu     sync.Mutex
	claims map[string]*resourceapi.ResourceClaim
	gets   int
}

func newFakeClaims(cs ...*resourceapi.ResourceClaim) *fakeClaims {
	f := &fakeClaims{claims: map[string]*resourceapi.ResourceClaim{}}
	for _, c := range cs {
		f.claims[claimKey(c.Namespace, c.Name)] = c
	}
	return f
}

func (f *fakeClaims) GetResourceClaim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("test: claim read without a deadline")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	c, ok := f.claims[claimKey(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
	}
	return c.DeepCopy(), nil
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// register hands a driver to plugins as the plugin manager does.
func register(t *testing.T, p *Plugins, d *testDriver) {
	t.Helper()
	if err := p.ValidatePlugin(d.name, d.sock, d.versions); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.RegisterPlugin(ctx, d.name, d.sock, d.versions); err != nil {
		t.Fatal(err)
	}
}
