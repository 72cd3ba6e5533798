package csi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/berth-dev/berth/internal/pluginmanager"
)

var _ pluginmanager.Handler = (*Handler)(nil)

const (
	rpcStage  = csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME
	rpcStats  = csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS
	rpcGroup  = csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP
	rpcSNMW   = csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER
	testNode  = "node-a"
	podUID    = types.UID("pod-1111")
	pvName    = "pv-data"
	volHandle = "vol-0001"
)

type env struct {
	root   string
	mounts *fakeMounts
	sink   *fakeSink
	m      *Manager
}

// newEnv is a Manager over a temp root. callTimeout bounds each driver
// call: short where a test drives a hanging driver (its length is never
// asserted), generous elsewhere.
func newEnv(t *testing.T, callTimeout time.Duration) *env {
	t.Helper()
	e := &env{root: t.TempDir(), mounts: newFakeMounts(), sink: newFakeSink()}
	e.m = e.restart(t, callTimeout)
	return e
}

// restart is a new Manager over the same root and mount table: berth after
// a restart, with no driver registered yet.
func (e *env) restart(t *testing.T, callTimeout time.Duration) *Manager {
	t.Helper()
	m, err := New(Options{Root: e.root, NodeName: testNode, Sink: e.sink, Mounts: e.mounts,
		CallTimeout: callTimeout, RegisterTimeout: callTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) driver(t *testing.T, name string, caps ...csipb.NodeServiceCapability_RPC_Type) *fakeDriver {
	t.Helper()
	d := &fakeDriver{name: name, nodeID: "id-" + name, caps: caps, mounts: e.mounts,
		hang: map[string]bool{}, fail: map[string]error{}}
	d.serve(t)
	return d
}

// register registers d as the plugin manager would, through the Handler.
func register(t *testing.T, m *Manager, d *fakeDriver) {
	t.Helper()
	h := m.Handler()
	if err := h.ValidatePlugin(d.name, d.socket, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterPlugin(context.Background(), d.name, d.socket, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func readJSON(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func pvPublish(driver string) PublishRequest {
	return PublishRequest{
		Driver: driver, VolumeHandle: volHandle, VolumeName: pvName,
		Pod:         PodInfo{Name: "web-0", Namespace: "default", UID: string(podUID), ServiceAccountName: "default"},
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		FSType:      "ext4", VolumeAttributes: map[string]string{"size": "1Gi"},
	}
}

func TestStagingDriverLifecycle(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "stage.csi.test", rpcStage, rpcStats)
	register(t, e.m, d)
	ctx := context.Background()

	st, err := e.m.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: volHandle, FSType: "ext4",
		AccessMode: v1.ReadWriteOnce, VolumeAttributes: map[string]string{"size": "1Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	wantStaging := StagingPath(e.root, d.name, volHandle)
	if !st.Called || st.StagingPath != wantStaging {
		t.Fatalf("Stage = %+v, want called at %s", st, wantStaging)
	}
	if got := readJSON(t, filepath.Join(filepath.Dir(wantStaging), "vol_data.json")); got["driverName"] != d.name || got["volumeHandle"] != volHandle || len(got) != 2 {
		t.Fatalf("staging vol_data.json = %v", got)
	}
	if got := d.lastStage().GetVolumeCapability().GetAccessMode().GetMode(); got != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Errorf("staged with access mode %v", got)
	}
	// Staged again: nothing to call.
	if st, err := e.m.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: volHandle}); err != nil || st.Called || st.StagingPath != wantStaging {
		t.Fatalf("second Stage = %+v, %v; want no call", st, err)
	}

	pub, err := e.m.Publish(ctx, pvPublish(d.name))
	if err != nil {
		t.Fatal(err)
	}
	wantTarget := filepath.Join(e.root, "pods", string(podUID), "volumes", "kubernetes.io~csi", pvName, "mount")
	if !pub.Called || pub.TargetPath != wantTarget {
		t.Fatalf("Publish = %+v, want called at %s", pub, wantTarget)
	}
	req := d.lastPublish()
	if req.StagingTargetPath != wantStaging || req.TargetPath != wantTarget || req.Readonly {
		t.Errorf("NodePublishVolume got staging %q target %q readonly %v", req.StagingTargetPath, req.TargetPath, req.Readonly)
	}
	if _, ok := req.VolumeContext[ctxPodName]; ok {
		t.Errorf("pod info passed without podInfoOnMount: %v", req.VolumeContext)
	}
	vd := readJSON(t, filepath.Join(filepath.Dir(wantTarget), "vol_data.json"))
	if vd["specVolID"] != pvName || vd["volumeHandle"] != volHandle || vd["driverName"] != d.name ||
		vd["nodeName"] != testNode || vd["volumeLifecycleMode"] != "Persistent" || vd["attachmentID"] != attachmentName(volHandle, d.name, testNode) {
		t.Errorf("publish vol_data.json = %v", vd)
	}
	if pub, err := e.m.Publish(ctx, pvPublish(d.name)); err != nil || pub.Called {
		t.Fatalf("second Publish = %+v, %v; want no call", pub, err)
	}

	stats, err := e.m.Stats(ctx, podUID, pvName)
	if err != nil {
		t.Fatal(err)
	}
	if stats.CapacityBytes != 1<<30 || stats.UsedBytes != 1<<20 || stats.AvailableBytes != 1<<30-1<<20 ||
		stats.Inodes != 1000 || stats.InodesUsed != 10 || stats.InodesFree != 990 {
		t.Errorf("Stats = %+v", stats)
	}

	if r, err := e.m.Unpublish(ctx, podUID, pvName); err != nil || !r.Called {
		t.Fatalf("Unpublish = %+v, %v", r, err)
	}
	if exists(filepath.Dir(wantTarget)) {
		t.Errorf("%s left behind", filepath.Dir(wantTarget))
	}
	if r, err := e.m.Unpublish(ctx, podUID, pvName); err != nil || r.Called {
		t.Fatalf("second Unpublish = %+v, %v; want nothing done", r, err)
	}
	if r, err := e.m.Unstage(ctx, d.name, volHandle); err != nil || !r.Called {
		t.Fatalf("Unstage = %+v, %v", r, err)
	}
	if exists(filepath.Dir(wantStaging)) {
		t.Errorf("%s left behind", filepath.Dir(wantStaging))
	}
	if r, err := e.m.Unstage(ctx, d.name, volHandle); err != nil || r.Called {
		t.Fatalf("second Unstage = %+v, %v; want nothing done", r, err)
	}
	for call, n := range map[string]int{"NodeStageVolume": 1, "NodePublishVolume": 1, "NodeUnpublishVolume": 1, "NodeUnstageVolume": 1} {
		if got := d.count(call); got != n {
			t.Errorf("%s called %d times, want %d (calls: %v)", call, got, n, d.callList())
		}
	}
}

func TestDriverWithoutStaging(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "plain.csi.test")
	register(t, e.m, d)
	ctx := context.Background()

	st, err := e.m.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: volHandle})
	if err != nil || st.Called || st.StagingPath != "" {
		t.Fatalf("Stage = %+v, %v; want nothing done", st, err)
	}
	if exists(filepath.Join(e.root, "plugins")) {
		t.Error("Stage made a staging dir for a driver that does not stage")
	}
	if _, err := e.m.Publish(ctx, pvPublish(d.name)); err != nil {
		t.Fatal(err)
	}
	if got := d.lastPublish().StagingTargetPath; got != "" {
		t.Errorf("NodePublishVolume got staging target %q from a driver without STAGE_UNSTAGE", got)
	}
	if _, err := e.m.Stats(ctx, podUID, pvName); !errors.Is(err, ErrStatsNotSupported) {
		t.Errorf("Stats without GET_VOLUME_STATS: %v, want ErrStatsNotSupported", err)
	}
	if _, err := e.m.Unpublish(ctx, podUID, pvName); err != nil {
		t.Fatal(err)
	}
	if r, err := e.m.Unstage(ctx, d.name, volHandle); err != nil || r.Called {
		t.Fatalf("Unstage = %+v, %v; want nothing done", r, err)
	}
	if n := d.count("NodeStageVolume") + d.count("NodeUnstageVolume"); n != 0 {
		t.Errorf("stage calls on a driver without STAGE_UNSTAGE: %v", d.callList())
	}
}

func TestPublishPodInfoAndFSGroup(t *testing.T) {
	e := newEnv(t, time.Minute)
	plain := e.driver(t, "plain.csi.test", rpcSNMW)
	group := e.driver(t, "group.csi.test", rpcGroup)
	register(t, e.m, plain)
	register(t, e.m, group)
	ctx := context.Background()
	gid := int64(2000)

	inline := PublishRequest{
		Driver: plain.name, VolumeName: "scratch", Ephemeral: true,
		VolumeHandle: EphemeralVolumeHandle(podUID, "scratch"),
		Pod:          PodInfo{Name: "web-0", Namespace: "ns1", UID: string(podUID), ServiceAccountName: "sa1"},
		ReadOnly:     true, PodInfoOnMount: true, FSGroup: &gid,
		VolumeAttributes: map[string]string{"k": "v"},
	}
	res, err := e.m.Publish(ctx, inline)
	if err != nil {
		t.Fatal(err)
	}
	if res.ApplyFSGroup {
		t.Error("fsGroup to apply to a read-only volume")
	}
	req := plain.lastPublish()
	want := map[string]string{"k": "v", ctxPodName: "web-0", ctxPodNamespace: "ns1", ctxPodUID: string(podUID),
		ctxServiceAccountName: "sa1", ctxEphemeral: "true"}
	if !mapsEqual(req.VolumeContext, want) || !req.Readonly {
		t.Errorf("NodePublishVolume context %v readonly %v, want %v readonly", req.VolumeContext, req.Readonly, want)
	}
	if got := req.GetVolumeCapability().GetAccessMode().GetMode(); got != csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER {
		t.Errorf("inline volume published with access mode %v", got)
	}
	if vd := readJSON(t, filepath.Join(PublishDir(e.root, podUID, "scratch"), "vol_data.json")); vd["volumeLifecycleMode"] != "Ephemeral" {
		t.Errorf("inline vol_data.json = %v", vd)
	}

	// No VOLUME_MOUNT_GROUP: the caller applies the fsGroup.
	rw := pvPublish(plain.name)
	rw.FSGroup = &gid
	if res, err := e.m.Publish(ctx, rw); err != nil || !res.ApplyFSGroup {
		t.Errorf("Publish = %+v, %v; want the caller to apply fsGroup", res, err)
	}
	if mg := plain.lastPublish().GetVolumeCapability().GetMount().GetVolumeMountGroup(); mg != "" {
		t.Errorf("VolumeMountGroup %q to a driver without VOLUME_MOUNT_GROUP", mg)
	}
	// VOLUME_MOUNT_GROUP: the driver applies it.
	rw.Driver = group.name
	rw.VolumeName = "pv-other"
	if res, err := e.m.Publish(ctx, rw); err != nil || res.ApplyFSGroup {
		t.Errorf("Publish = %+v, %v; want the driver to apply fsGroup", res, err)
	}
	if mg := group.lastPublish().GetVolumeCapability().GetMount().GetVolumeMountGroup(); mg != "2000" {
		t.Errorf("VolumeMountGroup %q, want 2000", mg)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestErrorAnswersRecordNothing(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "bad.csi.test", rpcStage)
	d.fail["NodeStageVolume"] = status.Error(codes.Internal, "disk on fire")
	d.fail["NodePublishVolume"] = status.Error(codes.InvalidArgument, "no such volume")
	register(t, e.m, d)
	ctx := context.Background()

	_, err := e.m.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: volHandle})
	checkOpError(t, err, "NodeStageVolume", d.name, volHandle, codes.Internal, false)
	if exists(StagingDir(e.root, d.name, volHandle)) {
		t.Error("a failed stage left its staging dir")
	}
	_, err = e.m.Publish(ctx, pvPublish(d.name))
	checkOpError(t, err, "NodePublishVolume", d.name, volHandle, codes.InvalidArgument, false)
	if exists(PublishDir(e.root, podUID, pvName)) {
		t.Error("a failed publish left its dir")
	}
	rec, err := Reconstruct(e.root, e.mounts)
	if err != nil || len(rec.Published)+len(rec.Staged)+len(rec.Problems) != 0 {
		t.Errorf("Reconstruct after failures = %+v, %v; want nothing", rec, err)
	}
}

func checkOpError(t *testing.T, err error, op, driver, handle string, code codes.Code, uncertain bool) {
	t.Helper()
	var oe *OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v (%T) is no OpError", err, err)
	}
	if oe.Op != op || oe.Driver != driver || oe.Volume != handle || oe.Uncertain != uncertain {
		t.Errorf("OpError %+v, want %s of %s with %s, uncertain %v", oe, op, handle, driver, uncertain)
	}
	for _, s := range []string{op, driver, handle} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	if got := status.Code(err); got != code {
		t.Errorf("error %v has code %v, want %v", err, got, code)
	}
}

func TestHangingDriver(t *testing.T) {
	// The short call timeout is how long a hung call waits; no test
	// asserts on it.
	e := newEnv(t, 300*time.Millisecond)
	d := e.driver(t, "hang.csi.test", rpcStage)
	register(t, e.m, d)
	d.mu.Lock()
	d.hang["NodeStageVolume"] = true
	d.mu.Unlock()
	ctx := context.Background()

	_, err := e.m.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: volHandle})
	checkOpError(t, err, "NodeStageVolume", d.name, volHandle, codes.DeadlineExceeded, true)
	// The driver may still stage it: the record stays, so that it is
	// unstaged later rather than leaked.
	rec, err := Reconstruct(e.root, e.mounts)
	if err != nil || len(rec.Staged) != 1 || rec.Staged[0].Mounted || rec.Staged[0].Data.VolumeHandle != volHandle {
		t.Fatalf("Reconstruct after a hung stage = %+v, %v; want the volume, not mounted", rec, err)
	}
	if r, err := e.m.Unstage(ctx, d.name, volHandle); err != nil || !r.Called {
		t.Fatalf("Unstage after a hung stage = %+v, %v; want the driver asked", r, err)
	}

	// A driver whose NodeGetInfo hangs is not registered.
	h := e.driver(t, "hang2.csi.test")
	h.hang["NodeGetInfo"] = true
	err = e.m.Handler().RegisterPlugin(ctx, h.name, h.socket, []string{"1.5.0"})
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), h.name) {
		t.Errorf("registering a hung driver: %v", err)
	}
	if _, ok := e.sink.get(h.name); ok || len(e.m.Drivers()) != 1 {
		t.Errorf("hung driver recorded: %+v", e.m.Drivers())
	}
}

func TestUnregisteredDriver(t *testing.T) {
	e := newEnv(t, time.Minute)
	ctx := context.Background()
	_, err := e.m.Stage(ctx, StageRequest{Driver: "gone.csi.test", VolumeHandle: volHandle})
	if !errors.Is(err, ErrDriverNotRegistered) || !strings.Contains(err.Error(), "gone.csi.test") || !strings.Contains(err.Error(), volHandle) {
		t.Errorf("Stage with an unknown driver: %v", err)
	}
	_, err = e.m.Publish(ctx, pvPublish("gone.csi.test"))
	if !errors.Is(err, ErrDriverNotRegistered) {
		t.Errorf("Publish with an unknown driver: %v", err)
	}
	if exists(filepath.Join(e.root, "pods")) {
		t.Error("Publish with an unknown driver made dirs")
	}
	// Nothing there: nothing to tear down, driver or not.
	if _, err := e.m.Unpublish(ctx, podUID, pvName); err != nil {
		t.Errorf("Unpublish of nothing: %v", err)
	}
	if _, err := e.m.Unstage(ctx, "gone.csi.test", volHandle); err != nil {
		t.Errorf("Unstage of nothing: %v", err)
	}
}

func TestRegistration(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "reg.csi.test", rpcStage, rpcStats, rpcGroup)
	h := e.m.Handler()
	for _, vs := range [][]string{nil, {"0.3.0"}, {"2.0.0", "3.1.0"}, {"banana"}} {
		err := h.ValidatePlugin(d.name, d.socket, vs)
		if err == nil {
			t.Errorf("versions %q accepted", vs)
			continue
		}
		for _, v := range vs {
			if !strings.Contains(err.Error(), v) {
				t.Errorf("refusal %q does not name the offered version %q", err, v)
			}
		}
	}
	if err := h.RegisterPlugin(context.Background(), d.name, d.socket, []string{"0.3.0"}); err == nil {
		t.Error("RegisterPlugin took CSI 0.3.0")
	}
	register(t, e.m, d)
	got := e.m.Drivers()
	want := Capabilities{StageUnstage: true, VolumeStats: true, VolumeMountGroup: true}
	if len(got) != 1 || got[0].NodeID != "id-reg.csi.test" || got[0].MaxVolumes != 16 || got[0].Capabilities != want ||
		got[0].Topology["topology.test/zone"] != "z1" || got[0].Version != "1.0.0" {
		t.Fatalf("Drivers = %+v", got)
	}
	entry, ok := e.sink.get(d.name)
	if !ok || entry.NodeID != "id-reg.csi.test" || entry.Allocatable == nil || *entry.Allocatable.Count != 16 ||
		strings.Join(entry.TopologyKeys, ",") != "topology.test/node,topology.test/zone" {
		t.Fatalf("CSINode entry = %+v", entry)
	}
	// The same name at the same version again is refused, as in the kubelet.
	if err := h.ValidatePlugin(d.name, "/other.sock", []string{"1.0.0"}); err == nil {
		t.Error("a second driver of the same name and version validated")
	}
	// Deregistering another endpoint of the name leaves the driver.
	h.DeRegisterPlugin(context.Background(), d.name, "/other.sock")
	if len(e.m.Drivers()) != 1 {
		t.Fatal("driver forgotten when another endpoint of its name went")
	}
	h.DeRegisterPlugin(context.Background(), d.name, d.socket)
	if len(e.m.Drivers()) != 0 {
		t.Error("driver still registered")
	}
	if _, ok := e.sink.get(d.name); ok {
		t.Error("CSINode entry still there")
	}

	// A sink that fails: nothing recorded.
	e.sink.installErr = errors.New("apiserver away")
	if err := h.RegisterPlugin(context.Background(), d.name, d.socket, []string{"1.0.0"}); err == nil || !strings.Contains(err.Error(), "apiserver away") {
		t.Errorf("RegisterPlugin with a failing sink: %v", err)
	}
	if len(e.m.Drivers()) != 0 {
		t.Error("driver recorded though its CSINode entry failed")
	}
}

// TestRegistrationThroughPluginManager runs the real plugin manager over a
// registration dir where a registrar (as node-driver-registrar) announces
// the driver.
func TestRegistrationThroughPluginManager(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "pm.csi.test", rpcStage)
	regDir := shortDir(t)
	pm, err := pluginmanager.New(pluginmanager.Options{Dir: regDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := pm.AddHandler("CSIPlugin", e.m.Handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	bad := startRegistrar(t, regDir, "old.csi.test", d.socket, "0.3.0")
	if s := waitStatus(t, bad); s.PluginRegistered || !strings.Contains(s.Error, "0.3.0") {
		t.Errorf("old driver told %+v", s)
	}
	reg := startRegistrar(t, regDir, d.name, d.socket, "1.0.0")
	if s := waitStatus(t, reg); !s.PluginRegistered {
		t.Fatalf("driver not registered: %q", s.Error)
	}
	if ds := e.m.Drivers(); len(ds) != 1 || ds[0].Name != d.name {
		t.Fatalf("Drivers = %+v", ds)
	}
	if _, ok := e.sink.get(d.name); !ok {
		t.Fatal("no CSINode entry")
	}
	// The registrar goes: the driver is deregistered.
	reg.stop()
	os.Remove(filepath.Join(regDir, d.name+"-reg.sock"))
	deadline := time.Now().Add(30 * time.Second)
	for len(e.m.Drivers()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("driver still registered 30s after its socket went")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The CSINode entry goes after the driver leaves the list: not at
	// the same instant.
	for {
		if _, ok := e.sink.get(d.name); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("CSINode entry still there 30s after the socket went")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitStatus(t *testing.T, r *registrar) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case s := <-r.status:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no registration status in 30s")
	}
	return nil
}

func TestReconstructAfterRestart(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "stage.csi.test", rpcStage)
	register(t, e.m, d)
	ctx := context.Background()
	if _, err := e.m.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: volHandle}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Publish(ctx, pvPublish(d.name)); err != nil {
		t.Fatal(err)
	}
	inline := PublishRequest{Driver: d.name, VolumeName: "scratch", Ephemeral: true,
		VolumeHandle: EphemeralVolumeHandle("pod-2222", "scratch"), Pod: PodInfo{UID: "pod-2222"}}
	if _, err := e.m.Publish(ctx, inline); err != nil {
		t.Fatal(err)
	}
	// A corrupt record and a volume dir without one.
	corrupt := filepath.Join(PublishDir(e.root, "pod-3333", "broken"), "vol_data.json")
	os.MkdirAll(filepath.Dir(corrupt), 0o750)
	os.WriteFile(corrupt, []byte(`{"driverName": "stage.csi.te`), 0o640)
	os.MkdirAll(PublishDir(e.root, "pod-3333", "norecord"), 0o750)

	// berth restarts: a new manager, no driver registered yet.
	m2 := e.restart(t, time.Minute)
	rec, err := Reconstruct(e.root, e.mounts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Staged) != 1 || !rec.Staged[0].Mounted || rec.Staged[0].StagingPath != StagingPath(e.root, d.name, volHandle) {
		t.Errorf("Staged = %+v", rec.Staged)
	}
	if len(rec.Published) != 2 {
		t.Fatalf("Published = %+v", rec.Published)
	}
	p := rec.Published[0]
	if p.PodUID != podUID || p.VolumeName != pvName || !p.Mounted || p.Data.VolumeHandle != volHandle ||
		p.StagingPath != StagingPath(e.root, d.name, volHandle) || p.Data.LifecycleMode != storagev1.VolumeLifecyclePersistent {
		t.Errorf("Published[0] = %+v", p)
	}
	if q := rec.Published[1]; q.PodUID != "pod-2222" || q.Data.LifecycleMode != storagev1.VolumeLifecycleEphemeral || q.StagingPath != "" {
		t.Errorf("Published[1] = %+v", q)
	}
	if len(rec.Problems) != 2 || !strings.Contains(rec.Problems[0].Error(), corrupt) || !strings.Contains(rec.Problems[1].Error(), "norecord") {
		t.Errorf("Problems = %v", rec.Problems)
	}

	// The driver comes back: what is mounted is not staged or published
	// again, and tears down as before.
	register(t, m2, d)
	if st, err := m2.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: volHandle}); err != nil || st.Called {
		t.Errorf("Stage after restart = %+v, %v; want no call", st, err)
	}
	if pub, err := m2.Publish(ctx, pvPublish(d.name)); err != nil || pub.Called {
		t.Errorf("Publish after restart = %+v, %v; want no call", pub, err)
	}
	if _, err := m2.Unpublish(ctx, podUID, pvName); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Unpublish(ctx, "pod-2222", "scratch"); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Unstage(ctx, d.name, volHandle); err != nil {
		t.Fatal(err)
	}
	if d.count("NodeStageVolume") != 1 || d.count("NodePublishVolume") != 2 {
		t.Errorf("calls %v: something was set up twice", d.callList())
	}
	// The corrupt record's volume is not touched by teardown guesses.
	if _, err := m2.Unpublish(ctx, "pod-3333", "broken"); err != nil {
		t.Errorf("Unpublish of an unmounted volume with a corrupt record: %v", err)
	}
	rec, _ = Reconstruct(e.root, e.mounts)
	if len(rec.Published)+len(rec.Staged) != 0 || len(rec.Problems) != 1 {
		t.Errorf("after teardown: %+v", rec)
	}
}
