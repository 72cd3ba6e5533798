package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/berth-dev/berth/test/cluster"
)

// TestCSIMockDriver runs the CSI mock driver and the upstream
// external-provisioner against a real control plane, with no node but a
// Node object: the driver's registration socket answers as
// node-driver-registrar's does, and a claim of its StorageClass gets a
// bound PersistentVolume of the driver, with Immediate binding and with
// WaitForFirstConsumer once a node is selected.
func TestCSIMockDriver(t *testing.T) {
	ctx := testContext(t)
	bins, err := cluster.Build(ctx, logWriter{t})
	if err != nil {
		t.Fatalf("build the control-plane binaries: %v", err)
	}
	addons, err := cluster.BuildAddons(ctx, logWriter{t})
	if err != nil {
		t.Fatalf("build the addons: %v", err)
	}
	dir := t.TempDir()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cp, err := cluster.Start(startCtx, bins, dir, cluster.Options{})
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	admin, err := cp.Client()
	if err != nil {
		t.Fatal(err)
	}
	const node, driverName = "csi-n1", "csi-mock.berth.test"
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	drv, err := cp.StartCSIMockDriver(ctx, addons.CSIMockDriver, cluster.CSIMockDriverOptions{
		DriverName:  driverName,
		RegistryDir: filepath.Join(root, "plugins_registry"),
		PluginsDir:  filepath.Join(root, "plugins"),
	})
	if err != nil {
		t.Fatalf("start the CSI mock driver: %v", err)
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
	t.Run("CSI identity and node", func(t *testing.T) { checkCSIIdentity(ctx, t, &drv.CSIPlugin) })

	if _, err := cp.CreateCSIDriver(ctx, driverName); err != nil {
		t.Fatal(err)
	}
	prov, err = cp.StartCSIProvisioner(ctx, addons.CSIProvisioner, cluster.CSIProvisionerOptions{Endpoint: drv.Endpoint, DriverName: driverName})
	if err != nil {
		t.Fatalf("start the external-provisioner: %v", err)
	}
	t.Run("Immediate", func(t *testing.T) {
		pv := checkProvisioned(ctx, t, cp, admin, driverName, storagev1.VolumeBindingImmediate, "")
		checkNodeCycle(ctx, t, drv, pv, filepath.Join(root, "pods"))
		deleteClaim(ctx, t, admin, pv)
	})
	t.Run("WaitForFirstConsumer", func(t *testing.T) {
		pv := checkProvisioned(ctx, t, cp, admin, driverName, storagev1.VolumeBindingWaitForFirstConsumer, node)
		deleteClaim(ctx, t, admin, pv)
	})

	if err := prov.Stop(); err != nil {
		t.Errorf("stop the provisioner: %v", err)
	}
	// The provisioner retries what it may not do, so a missing permission
	// shows in its log only.
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

func provLog(p *cluster.CSIProvisioner) string {
	if p == nil {
		return ""
	}
	return p.Log()
}

// checkCSIRegistration asks the registration socket what the kubelet's
// plugin watcher asks of a CSI driver's registrar.
func checkCSIRegistration(ctx context.Context, t *testing.T, drv *cluster.CSIPlugin) {
	conn, err := grpc.NewClient("unix:"+drv.RegistrationSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := reg.GetInfo(cctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	t.Logf("GetInfo: type %q name %q endpoint %q versions %q", info.Type, info.Name, info.Endpoint, info.SupportedVersions)
	if info.Type != registerapi.CSIPlugin || info.Name != drv.Name || info.Endpoint != drv.Endpoint {
		t.Errorf("GetInfo = type %q, name %q, endpoint %q; want %q, %q, %q",
			info.Type, info.Name, info.Endpoint, registerapi.CSIPlugin, drv.Name, drv.Endpoint)
	}
	if !slices.Contains(info.SupportedVersions, "1.0.0") {
		t.Errorf("GetInfo's versions %q lack 1.0.0", info.SupportedVersions)
	}
	if _, err := reg.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Errorf("NotifyRegistrationStatus: %v", err)
	}
}

// checkCSIIdentity asks the CSI socket the registration names what a node
// asks a CSI driver first, and returns its node ID.
func checkCSIIdentity(ctx context.Context, t *testing.T, drv *cluster.CSIPlugin) string {
	conn, err := grpc.NewClient("unix:"+drv.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pi, err := csi.NewIdentityClient(conn).GetPluginInfo(cctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatalf("GetPluginInfo: %v", err)
	}
	if pi.Name != drv.Name {
		t.Errorf("GetPluginInfo names %q, want %q", pi.Name, drv.Name)
	}
	node := csi.NewNodeClient(conn)
	caps, err := node.NodeGetCapabilities(cctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatalf("NodeGetCapabilities: %v", err)
	}
	var got []csi.NodeServiceCapability_RPC_Type
	for _, c := range caps.Capabilities {
		got = append(got, c.GetRpc().GetType())
	}
	t.Logf("node capabilities: %v", got)
	if !slices.Contains(got, csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME) {
		t.Errorf("node capabilities %v lack STAGE_UNSTAGE_VOLUME", got)
	}
	ni, err := node.NodeGetInfo(cctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatalf("NodeGetInfo: %v", err)
	}
	t.Logf("NodeGetInfo: node ID %q, max volumes %d, topology %v", ni.NodeId, ni.MaxVolumesPerNode, ni.AccessibleTopology)
	if ni.NodeId == "" {
		t.Error("NodeGetInfo: empty node ID")
	}
	return ni.NodeId
}

// checkProvisioned creates a StorageClass of driver bound as mode and a
// claim of it (with node as its selected node, if not ""), and waits for
// the claim to be bound to a PersistentVolume the driver provisioned.
func checkProvisioned(ctx context.Context, t *testing.T, cp *cluster.ControlPlane, admin kubernetes.Interface, driver string, mode storagev1.VolumeBindingMode, node string) *v1.PersistentVolume {
	name := "csi-" + map[storagev1.VolumeBindingMode]string{
		storagev1.VolumeBindingImmediate: "immediate", storagev1.VolumeBindingWaitForFirstConsumer: "wffc",
	}[mode]
	if _, err := cp.CreateStorageClass(ctx, name, driver, mode); err != nil {
		t.Fatal(err)
	}
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &name,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if node != "" {
		// What kube-scheduler writes once it has picked a consumer's node.
		pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
	}
	if _, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvName string
	eventually(ctx, t, 2*time.Minute, func(ctx context.Context) error {
		c, err := admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != v1.ClaimBound || c.Spec.VolumeName == "" {
			return fmt.Errorf("claim %s: phase %s, volume %q, annotations %v", name, c.Status.Phase, c.Spec.VolumeName, c.Annotations)
		}
		pvName = c.Spec.VolumeName
		return nil
	})
	pv, err := admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := pv.Spec.CSI
	if src == nil || src.Driver != driver || src.VolumeHandle == "" {
		t.Fatalf("PV %s: CSI source %+v, want driver %s and a volume handle", pv.Name, src, driver)
	}
	t.Logf("PV %s: driver %s, handle %q, fsType %q, attributes %v, capacity %s, node affinity %v",
		pv.Name, src.Driver, src.VolumeHandle, src.FSType, src.VolumeAttributes,
		pv.Spec.Capacity.Storage(), pv.Spec.NodeAffinity)
	if pv.Status.Phase != v1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != name {
		t.Errorf("PV %s: phase %s, claim %v; want Bound to %s", pv.Name, pv.Status.Phase, pv.Spec.ClaimRef, name)
	}
	return pv
}

// deleteClaim deletes the claim of pv and waits for pv to go with it, as
// its reclaim policy says.
func deleteClaim(ctx context.Context, t *testing.T, admin kubernetes.Interface, pv *v1.PersistentVolume) {
	ref := pv.Spec.ClaimRef
	if err := admin.CoreV1().PersistentVolumeClaims(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 2*time.Minute, func(ctx context.Context) error {
		_, err := admin.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("PV %s still there", pv.Name)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// checkNodeCycle stages, publishes, unpublishes and unstages pv through
// the driver's CSI socket as a kubelet would (paths under dir, the staging
// directory made by the caller as the kubelet makes it), and shows what the
// driver does with the target directory: creates it on publish and removes
// it on unpublish, mounting nothing.
func checkNodeCycle(ctx context.Context, t *testing.T, drv *cluster.CSIMockDriver, pv *v1.PersistentVolume, dir string) {
	conn, err := grpc.NewClient("unix:"+drv.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	node := csi.NewNodeClient(conn)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	staging := filepath.Join(dir, "staging", pv.Name)
	target := filepath.Join(dir, "pod-1", "volumes", pv.Name, "mount")
	for _, d := range []string{staging, filepath.Dir(target)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	src := pv.Spec.CSI
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	if _, err := node.NodeStageVolume(cctx, &csi.NodeStageVolumeRequest{
		VolumeId: src.VolumeHandle, StagingTargetPath: staging, VolumeCapability: capability, VolumeContext: src.VolumeAttributes,
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	if _, err := node.NodePublishVolume(cctx, &csi.NodePublishVolumeRequest{
		VolumeId: src.VolumeHandle, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, VolumeContext: src.VolumeAttributes,
	}); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Errorf("target %s after NodePublishVolume: %v, want a directory", target, err)
	}
	if _, err := node.NodeUnpublishVolume(cctx, &csi.NodeUnpublishVolumeRequest{VolumeId: src.VolumeHandle, TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target %s after NodeUnpublishVolume: %v, want it gone", target, err)
	}
	if _, err := node.NodeUnstageVolume(cctx, &csi.NodeUnstageVolumeRequest{VolumeId: src.VolumeHandle, StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
}
