package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/test/cluster"
)

// TestCSIHostPathDriver runs this project's host path CSI driver and the
// upstream external-provisioner against a real control plane: a claim gets
// a bound PersistentVolume whose directory the driver made; the node
// service, called over the driver's socket as a kubelet calls it, really
// bind-mounts it at a staging and a target path, keeps knowing it across a
// restart, and leaves nothing mounted once done; deleting the claim
// deletes the directory.
func TestCSIHostPathDriver(t *testing.T) {
	ctx := testContext(t)
	bins, err := cluster.Build(ctx, logWriter{t})
	if err != nil {
		t.Fatalf("build the control-plane binaries: %v", err)
	}
	addons, err := cluster.BuildAddons(ctx, logWriter{t})
	if err != nil {
		t.Fatalf("build the addons: %v", err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cp, err := cluster.Start(startCtx, bins, t.TempDir(), cluster.Options{})
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	admin, err := cp.Client()
	if err != nil {
		t.Fatal(err)
	}
	const node, driverName = "hostpath-n1", "hostpath.berth.test"
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	// Registered after TempDir's own cleanup, so run before it: whatever
	// a failed test left mounted under root goes before root does.
	t.Cleanup(func() { unmountUnder(t, root) })
	drv, err := cp.StartCSIHostPathDriver(ctx, addons.CSIHostPathDriver, cluster.CSIHostPathDriverOptions{
		DriverName:  driverName,
		NodeID:      node,
		StateDir:    filepath.Join(root, "state"),
		PluginsDir:  filepath.Join(root, "plugins"),
		RegistryDir: filepath.Join(root, "plugins_registry"),
	})
	if err != nil {
		t.Fatalf("start the CSI host path driver: %v", err)
	}
	var prov *cluster.CSIProvisioner
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", cp.LogTails(40))
			for _, log := range []string{drv.Log(), provLog(prov)} {
				data, _ := os.ReadFile(log)
				t.Logf("%s:\n%s", log, lastLines(string(data), 60))
			}
		}
		if prov != nil {
			prov.Stop()
		}
		drv.Stop()
	})

	t.Run("registration", func(t *testing.T) { checkCSIRegistration(ctx, t, &drv.CSIPlugin) })
	t.Run("CSI identity and node", func(t *testing.T) {
		if id := checkCSIIdentity(ctx, t, &drv.CSIPlugin); id != node {
			t.Errorf("NodeGetInfo: node ID %q, want %q", id, node)
		}
	})

	if _, err := cp.CreateCSIDriver(ctx, driverName); err != nil {
		t.Fatal(err)
	}
	prov, err = cp.StartCSIProvisioner(ctx, addons.CSIProvisioner, cluster.CSIProvisionerOptions{Endpoint: drv.Endpoint, DriverName: driverName})
	if err != nil {
		t.Fatalf("start the external-provisioner: %v", err)
	}
	pv := checkProvisioned(ctx, t, cp, admin, driverName, storagev1.VolumeBindingImmediate, "")
	volDir := filepath.Join(drv.StateDir, "volumes", pv.Spec.CSI.VolumeHandle)
	if fi, err := os.Stat(volDir); err != nil || !fi.IsDir() {
		t.Fatalf("the volume's directory %s: %v, want a directory", volDir, err)
	}
	if got := pv.Spec.Capacity.Storage().Value(); got != 1<<30 {
		t.Errorf("PV %s: capacity %d, want the claim's 1Gi", pv.Name, got)
	}
	t.Run("node", func(t *testing.T) { checkHostPathNode(ctx, t, drv, pv, filepath.Join(root, "pods")) })
	// The node check restarted the driver, and the provisioner exits once
	// it loses its connection, as upstream's sidecar does (its pod's
	// restart reconnects it): start another.
	if err := prov.Stop(); err != nil {
		t.Logf("stop the provisioner that lost its driver: %v", err)
	}
	prov, err = cp.StartCSIProvisioner(ctx, addons.CSIProvisioner, cluster.CSIProvisionerOptions{Endpoint: drv.Endpoint, DriverName: driverName})
	if err != nil {
		t.Fatalf("start the external-provisioner again: %v", err)
	}
	deleteClaim(ctx, t, admin, pv)
	if _, err := os.Stat(volDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the volume's directory %s after its PV went: %v, want it gone", volDir, err)
	}

	if err := prov.Stop(); err != nil {
		t.Errorf("stop the provisioner: %v", err)
	}
	if data, err := os.ReadFile(prov.Log()); err != nil || strings.Contains(string(data), "forbidden") {
		t.Errorf("the provisioner's log (%v) reports a forbidden request:\n%s", err, lastLines(string(data), 60))
	}
	if err := drv.Stop(); err != nil {
		t.Errorf("stop the driver: %v", err)
	}
	for _, sock := range []string{drv.RegistrationSocket, drv.Endpoint} {
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Stop: %v, want it gone", sock, err)
		}
	}
}

// csiNodeClient connects to the driver's CSI socket; the connection is
// closed when the test ends.
func csiNodeClient(t *testing.T, endpoint string) csi.NodeClient {
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return csi.NewNodeClient(conn)
}

// checkHostPathNode stages and publishes pv as a kubelet would (paths
// under dir), and checks that the mounts are real: what is written through
// the target shows at the staging path and in the driver's state
// directory. After a restart of the driver, the volume's stats and a
// repeated publish still work; unpublishing and unstaging leave nothing
// mounted.
func checkHostPathNode(ctx context.Context, t *testing.T, drv *cluster.CSIHostPathDriver, pv *v1.PersistentVolume, dir string) {
	node := csiNodeClient(t, drv.Endpoint)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	id := pv.Spec.CSI.VolumeHandle
	staging := filepath.Join(dir, "staging", pv.Name)
	target := filepath.Join(dir, "pod-1", "volumes", pv.Name, "mount")
	for _, d := range []string{staging, filepath.Dir(target)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	stage := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capability, VolumeContext: pv.Spec.CSI.VolumeAttributes}
	publish := &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, VolumeContext: pv.Spec.CSI.VolumeAttributes}

	checkBadNodeRequests(cctx, t, node, publish)
	if _, err := node.NodeStageVolume(cctx, stage); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	if _, err := node.NodePublishVolume(cctx, publish); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	published := []string{staging, target}
	sort.Strings(published) // as mountsUnder lists them
	if got := mountsUnder(t, dir); !slices.Equal(got, published) {
		t.Errorf("mounted under %s: %q, want the staging and the target path", dir, got)
	}
	const content = "written through the target path\n"
	if err := os.WriteFile(filepath.Join(target, "hello"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{staging, filepath.Join(drv.StateDir, "volumes", id)} {
		if data, err := os.ReadFile(filepath.Join(d, "hello")); err != nil || string(data) != content {
			t.Errorf("%s/hello: %q, %v; want what was written through the target", d, data, err)
		}
	}

	if err := drv.Restart(cctx); err != nil {
		t.Fatalf("restart the driver: %v", err)
	}
	node = csiNodeClient(t, drv.Endpoint)
	checkVolumeStats(cctx, t, node, id, target)
	// Asked again, as a kubelet does after a restart: the same answer.
	if _, err := node.NodeStageVolume(cctx, stage); err != nil {
		t.Errorf("NodeStageVolume again: %v", err)
	}
	if _, err := node.NodePublishVolume(cctx, publish); err != nil {
		t.Errorf("NodePublishVolume again: %v", err)
	}
	if got := mountsUnder(t, dir); !slices.Equal(got, published) {
		t.Errorf("mounted under %s after publishing again: %q, want the staging and the target path once each", dir, got)
	}

	for range 2 { // the second time, as a retrying kubelet would
		if _, err := node.NodeUnpublishVolume(cctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("NodeUnpublishVolume: %v", err)
		}
		if _, err := node.NodeUnstageVolume(cctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatalf("NodeUnstageVolume: %v", err)
		}
	}
	if got := mountsUnder(t, dir); len(got) != 0 {
		t.Errorf("mounted under %s after unpublish and unstage: %q", dir, got)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target %s after NodeUnpublishVolume: %v, want it gone", target, err)
	}
	if data, err := os.ReadFile(filepath.Join(drv.StateDir, "volumes", id, "hello")); err != nil || string(data) != content {
		t.Errorf("the volume's file after unstaging: %q, %v; want it kept", data, err)
	}
}

// checkBadNodeRequests sends what no node should, and wants the errors the
// CSI spec gives: they name what is wrong.
func checkBadNodeRequests(ctx context.Context, t *testing.T, node csi.NodeClient, publish *csi.NodePublishVolumeRequest) {
	noTarget := *publish
	noTarget.TargetPath = ""
	_, err := node.NodePublishVolume(ctx, &noTarget)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "target_path") {
		t.Errorf("NodePublishVolume without a target path: %v, want InvalidArgument naming target_path", err)
	}
	unknown := &csi.NodeStageVolumeRequest{VolumeId: "hp-unknown", StagingTargetPath: publish.StagingTargetPath, VolumeCapability: publish.VolumeCapability}
	if _, err := node.NodeStageVolume(ctx, unknown); status.Code(err) != codes.NotFound {
		t.Errorf("NodeStageVolume of an unknown volume: %v, want NotFound", err)
	}
	notStaged := *publish
	if _, err := node.NodePublishVolume(ctx, &notStaged); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("NodePublishVolume before NodeStageVolume: %v, want FailedPrecondition", err)
	}
}

// checkVolumeStats asks for the stats of the volume id published at path:
// its file system's, in bytes and inodes.
func checkVolumeStats(ctx context.Context, t *testing.T, node csi.NodeClient, id, path string) {
	st, err := node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: path})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats: %v", err)
	}
	units := map[csi.VolumeUsage_Unit]*csi.VolumeUsage{}
	for _, u := range st.Usage {
		units[u.Unit] = u
		t.Logf("volume stats: %s total %d, available %d, used %d", u.Unit, u.Total, u.Available, u.Used)
	}
	for _, unit := range []csi.VolumeUsage_Unit{csi.VolumeUsage_BYTES, csi.VolumeUsage_INODES} {
		u := units[unit]
		if u == nil || u.Total <= 0 || u.Used <= 0 || u.Available < 0 || u.Available > u.Total {
			t.Errorf("NodeGetVolumeStats %s: %v, want a total, some used and at most the total available", unit, u)
		}
	}
	if _, err := node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "hp-unknown", VolumePath: path}); status.Code(err) != codes.NotFound {
		t.Errorf("NodeGetVolumeStats of an unknown volume: %v, want NotFound", err)
	}
}

// mountsUnder lists the mount points under dir, sorted.
func mountsUnder(t *testing.T, dir string) []string {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, m := range ms {
		points = append(points, m.Mountpoint)
	}
	sort.Strings(points)
	return points
}

// unmountUnder unmounts whatever is mounted under dir, deepest first, so
// that a failed test leaves no mount behind.
func unmountUnder(t *testing.T, dir string) {
	points := mountsUnder(t, dir)
	for i := len(points) - 1; i >= 0; i-- {
		t.Logf("unmounting %s, left mounted", points[i])
		if err := unix.Unmount(points[i], 0); err != nil {
			// Busy: detach it, so that it goes once it is not.
			if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", points[i], err)
			}
		}
	}
}
