package csi

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	storagev1 "k8s.io/api/storage/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakeMounts is the test's mount table: the fake drivers "mount" a target
// by creating it and adding it here, and "unmount" by the reverse. Nothing
// is mounted for real.
type fakeMounts struct {
	mu      sync.Mutex
	mounted map[string]bool
}

func newFakeMounts() *fakeMounts { return &fakeMounts{mounted: map[string]bool{}} }

func (f *fakeMounts) IsMountPoint(path string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mounted[path], nil
}

func (f *fakeMounts) set(path string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.mounted[path] = true
	} else {
		delete(f.mounted, path)
	}
}

// fakeDriver is a CSI identity and node server on a unix socket that
// records its calls. hang makes the named methods wait until the caller
// gives up; fail makes them answer that error.
type fakeDriver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer

	name   string
	nodeID string
	caps   []csipb.NodeServiceCapability_RPC_Type
	hang   map[string]bool
	fail   map[string]error
	mounts *fakeMounts
	socket string

	mu        sync.Mutex
	calls     []string
	stages    []*csipb.NodeStageVolumeRequest
	publishes []*csipb.NodePublishVolumeRequest
}

// shortDir is a temp dir with a short path, since a unix socket's path
// must fit in 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// serve starts d on a socket in a new dir; it stops when the test ends.
func (d *fakeDriver) serve(t *testing.T) {
	t.Helper()
	d.socket = filepath.Join(shortDir(t), "csi.sock")
	l, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	csipb.RegisterIdentityServer(s, d)
	csipb.RegisterNodeServer(s, d)
	go s.Serve(l)
	t.Cleanup(s.Stop)
}

// enter records a call and says how it must end: (nil, false) to go on.
func (d *fakeDriver) enter(ctx context.Context, call string) (error, bool) {
	d.mu.Lock()
	d.calls = append(d.calls, call)
	hang, fail := d.hang[call], d.fail[call]
	d.mu.Unlock()
	if hang {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err(), true
	}
	return fail, fail != nil
}

func (d *fakeDriver) callList() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// count is how many times call was made.
func (d *fakeDriver) count(call string) int {
	n := 0
	for _, c := range d.callList() {
		if c == call {
			n++
		}
	}
	return n
}

func (d *fakeDriver) lastPublish() *csipb.NodePublishVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.publishes) == 0 {
		return nil
	}
	return d.publishes[len(d.publishes)-1]
}

func (d *fakeDriver) lastStage() *csipb.NodeStageVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.stages) == 0 {
		return nil
	}
	return d.stages[len(d.stages)-1]
}

func (d *fakeDriver) GetPluginInfo(ctx context.Context, _ *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.name, VendorVersion: "test"}, nil
}

func (d *fakeDriver) NodeGetInfo(ctx context.Context, _ *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	if err, done := d.enter(ctx, "NodeGetInfo"); done {
		return nil, err
	}
	return &csipb.NodeGetInfoResponse{
		NodeId:             d.nodeID,
		MaxVolumesPerNode:  16,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.test/zone": "z1", "topology.test/node": d.nodeID}},
	}, nil
}

func (d *fakeDriver) NodeGetCapabilities(ctx context.Context, _ *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	if err, done := d.enter(ctx, "NodeGetCapabilities"); done {
		return nil, err
	}
	resp := &csipb.NodeGetCapabilitiesResponse{}
	for _, c := range d.caps {
		resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{
			Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}},
		})
	}
	return resp, nil
}

func (d *fakeDriver) NodeStageVolume(ctx context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	if err, done := d.enter(ctx, "NodeStageVolume"); done {
		return nil, err
	}
	// The CO creates the staging target; the driver only mounts on it.
	if _, err := os.Stat(r.StagingTargetPath); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "staging target: %v", err)
	}
	d.mu.Lock()
	d.stages = append(d.stages, r)
	d.mu.Unlock()
	d.mounts.set(r.StagingTargetPath, true)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (d *fakeDriver) NodeUnstageVolume(ctx context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	if err, done := d.enter(ctx, "NodeUnstageVolume"); done {
		return nil, err
	}
	d.mounts.set(r.StagingTargetPath, false)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *fakeDriver) NodePublishVolume(ctx context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if err, done := d.enter(ctx, "NodePublishVolume"); done {
		return nil, err
	}
	if r.StagingTargetPath != "" {
		if ok, _ := d.mounts.IsMountPoint(r.StagingTargetPath); !ok {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", r.VolumeId, r.StagingTargetPath)
		}
	}
	// The driver creates the publish target (its parent is the CO's).
	if err := os.Mkdir(r.TargetPath, 0o750); err != nil && !os.IsExist(err) {
		return nil, status.Errorf(codes.Internal, "creating target: %v", err)
	}
	d.mu.Lock()
	d.publishes = append(d.publishes, r)
	d.mu.Unlock()
	d.mounts.set(r.TargetPath, true)
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *fakeDriver) NodeUnpublishVolume(ctx context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	if err, done := d.enter(ctx, "NodeUnpublishVolume"); done {
		return nil, err
	}
	d.mounts.set(r.TargetPath, false)
	if err := os.Remove(r.TargetPath); err != nil && !os.IsNotExist(err) {
		return nil, status.Errorf(codes.Internal, "removing target: %v", err)
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (d *fakeDriver) NodeGetVolumeStats(ctx context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	if err, done := d.enter(ctx, "NodeGetVolumeStats"); done {
		return nil, err
	}
	if ok, _ := d.mounts.IsMountPoint(r.VolumePath); !ok {
		return nil, status.Errorf(codes.NotFound, "%s is not published", r.VolumePath)
	}
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 1 << 30, Used: 1 << 20, Available: 1<<30 - 1<<20},
		{Unit: csipb.VolumeUsage_INODES, Total: 1000, Used: 10, Available: 990},
	}}, nil
}

// registrar is a registration server on a socket in the plugin manager's
// dir, as node-driver-registrar runs beside a driver.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	status chan *registerapi.RegistrationStatus
	stop   func()
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.status <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

func startRegistrar(t *testing.T, dir, name, endpoint string, versions ...string) *registrar {
	t.Helper()
	r := &registrar{
		info: &registerapi.PluginInfo{
			Type: registerapi.CSIPlugin, Name: name, Endpoint: endpoint, SupportedVersions: versions,
		},
		status: make(chan *registerapi.RegistrationStatus, 8),
	}
	l, err := net.Listen("unix", filepath.Join(dir, name+"-reg.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, r)
	go s.Serve(l)
	r.stop = s.Stop
	t.Cleanup(s.Stop)
	return r
}

// fakeSink records the CSINode entries.
type fakeSink struct {
	mu         sync.Mutex
	drivers    map[string]storagev1.CSINodeDriver
	topology   map[string]map[string]string
	installErr error
}

func newFakeSink() *fakeSink {
	return &fakeSink{drivers: map[string]storagev1.CSINodeDriver{}, topology: map[string]map[string]string{}}
}

func (s *fakeSink) InstallDriver(_ context.Context, d storagev1.CSINodeDriver, topo map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.installErr != nil {
		return s.installErr
	}
	s.drivers[d.Name] = d
	s.topology[d.Name] = topo
	return nil
}

func (s *fakeSink) UninstallDriver(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.drivers, name)
	delete(s.topology, name)
	return nil
}

func (s *fakeSink) get(name string) (storagev1.CSINodeDriver, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.drivers[name]
	return d, ok
}
