package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/test/cluster"
)

// csiNode is a cluster node with the CSI mock driver registered with it, a
// provisioner for the driver and a StorageClass of it.
type csiNode struct {
	cn     *clusterNode
	driver *cluster.CSIMockDriver
	class  string
}

// startCSINode starts berth as node name of cp (plugin registration in a
// directory of the test's), the CSI mock driver for it under a name of the
// test's own, its CSIDriver object, the external-provisioner and an
// Immediate StorageClass.
func startCSINode(t *testing.T, cp *cluster.ControlPlane, client kubernetes.Interface, name string) *csiNode {
	t.Helper()
	addons := nodePluginAddons(t)
	dir, registry := pluginSocketsDir(t, "berth-csi-")
	cn := startClusterNode(t, cp, name, "--plugin-registration-dir", registry)
	waitNodeReady(t, client, name, true, 90*time.Second)

	driverName := fmt.Sprintf("e2e-%06x.csi-mock.berth.test", rand.IntN(1<<24))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	d, err := cp.StartCSIMockDriver(ctx, addons.CSIMockDriver, cluster.CSIMockDriverOptions{
		DriverName: driverName, RegistryDir: registry, PluginsDir: filepath.Join(dir, "plugins"),
	})
	if err != nil {
		t.Fatalf("starting the CSI mock driver: %v", err)
	}
	stopAfterTest(t, "CSI mock driver", d.Log(), d.Stop)
	if _, err := cp.CreateCSIDriver(ctx, driverName); err != nil {
		t.Fatal(err)
	}
	prov, err := cp.StartCSIProvisioner(ctx, addons.CSIProvisioner, cluster.CSIProvisionerOptions{
		Endpoint: d.Endpoint, DriverName: driverName,
	})
	if err != nil {
		t.Fatalf("starting the external-provisioner: %v", err)
	}
	stopAfterTest(t, "external-provisioner", prov.Log(), prov.Stop)
	class := "berth-" + strings.SplitN(driverName, ".", 2)[0]
	if _, err := cp.CreateStorageClass(ctx, class, driverName, storagev1.VolumeBindingImmediate); err != nil {
		t.Fatal(err)
	}
	return &csiNode{cn: cn, driver: d, class: class}
}

// csiPodYAML is a PVC of class and a pod writing to it, beside a generic
// ephemeral volume of the same class.
func csiPodYAML(class string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: %[1]s
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: csi}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %[2]s
    command: ["sh", "-c", "echo hello > /data/greeting && echo scratch > /scratch/s && sleep 3600"]
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: scratch, mountPath: /scratch}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec:
          storageClassName: %[1]s
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 1Gi}}
`, class, busybox)
}

// A pod with a PVC and a generic ephemeral volume of a CSI driver runs on
// the berth node: the driver registered (the node's CSINode lists it),
// berth staged and published both volumes through it, the container wrote
// to them at the published paths; a berth killed with SIGKILL and started
// again keeps the pod running; deleting the pod unpublishes and unstages
// both, leaves nothing under the pod's volume directory, and the ephemeral
// volume's PVC goes with the pod while the other stays.
//
// The driver is the CSI mock of Kubernetes' storage e2e tests: the Go
// module proxy serves neither the CSI host path driver nor
// node-driver-registrar. It mounts nothing: what the container writes
// lands in the published directory itself.
func TestCSIMockVolumeCluster(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	cs := startCSINode(t, cp, client, "berth-csi")
	waitFor(t, time.Minute, "the CSINode's driver", func() (bool, string) {
		n, err := client.StorageV1().CSINodes().Get(t.Context(), "berth-csi", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range n.Spec.Drivers {
			if d.Name == cs.driver.Name {
				return d.NodeID != "", "no node ID"
			}
		}
		return false, fmt.Sprintf("%d drivers", len(n.Spec.Drivers))
	})
	applyYAML(t, cp, csiPodYAML(cs.class))
	pod := waitClusterPodRunning(t, client, "csi", 3*time.Minute)
	ephemeral := "csi-scratch"
	if c, err := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), ephemeral, metav1.GetOptions{}); err != nil || len(c.OwnerReferences) == 0 || c.OwnerReferences[0].UID != pod.UID {
		t.Fatalf("the ephemeral volume's PVC %v: %v", c, err)
	}
	log := cs.cn.berthLog()
	if n := strings.Count(log, `"msg":"MountVolume.SetUp succeeded"`); n < 2 {
		t.Errorf("%d volumes published, want the PVC's and the ephemeral one", n)
	}
	if n := strings.Count(log, `"msg":"MountVolume.MountDevice succeeded"`); n < 2 {
		t.Errorf("%d volumes staged, want 2 (the driver stages)", n)
	}
	published := filepath.Join(cs.cn.root, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", "*", "mount")
	for _, want := range []string{"greeting", "s"} {
		waitFor(t, time.Minute, "the container's write to "+want, func() (bool, string) {
			found, _ := filepath.Glob(filepath.Join(published, want))
			return len(found) == 1, fmt.Sprint(found)
		})
	}

	cs.cn.kill9()
	cs.cn.start()
	waitFor(t, time.Minute, "the pod running again on the new berth", func() (bool, string) {
		for _, p := range cs.cn.pods() {
			if p.UID == pod.UID {
				return p.Status.Phase == v1.PodRunning, string(p.Status.Phase)
			}
		}
		return false, "not shown"
	})
	if p := waitClusterPodRunning(t, client, "csi", time.Minute); statusOf(p, "main").RestartCount != 0 {
		t.Errorf("main restarted across berth's restart: %+v", statusOf(p, "main"))
	}

	kubectl(t, cp, "delete", "pod", "csi", "--wait=true", "--timeout=90s")
	waitFor(t, time.Minute, "both volumes torn down", func() (bool, string) {
		log := cs.cn.berthLog()
		return strings.Count(log, `"msg":"UnmountVolume.TearDown succeeded"`) >= 2 &&
			strings.Count(log, `"msg":"UnmountDevice succeeded"`) >= 2, "not yet"
	})
	if left, _ := filepath.Glob(filepath.Join(cs.cn.root, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", "*")); len(left) != 0 {
		t.Errorf("left under the pod's CSI volumes: %v", left)
	}
	waitFor(t, time.Minute, "the ephemeral volume's PVC gone with its pod", func() (bool, string) {
		_, err := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), ephemeral, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "data", metav1.GetOptions{}); err != nil {
		t.Errorf("the PVC: %v", err)
	}
}
