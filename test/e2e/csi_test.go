package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
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

// csiNode is a cluster node with a CSI driver registered with it, a
// provisioner for the driver and a StorageClass of it.
type csiNode struct {
	cn     *clusterNode
	driver *cluster.CSIPlugin
	class  string
	// stateDir holds the host path driver's volumes; "" for the mock.
	stateDir string
}

// csiDriverKind picks the CSI driver of a node.
type csiDriverKind int

const (
	// csiMock is the CSI mock of Kubernetes' storage e2e tests: it mounts
	// nothing, but counts and logs every call.
	csiMock csiDriverKind = iota
	// csiHostPath is the project's host path driver (test/cluster/tools):
	// volumes are directories of its state dir, bind-mounted.
	csiHostPath
)

// startCSINode starts berth as node name of cp (plugin registration in a
// directory of the test's), a CSI driver of kind for it under a name of
// the test's own, its CSIDriver object, the external-provisioner and an
// Immediate StorageClass.
func startCSINode(t *testing.T, cp *cluster.ControlPlane, client kubernetes.Interface, name string, kind csiDriverKind) *csiNode {
	t.Helper()
	addons := nodePluginAddons(t)
	dir, registry := pluginSocketsDir(t, "berth-csi-")
	cn := startClusterNode(t, cp, name, "--plugin-registration-dir", registry)
	waitNodeReady(t, client, name, true, 90*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cs := &csiNode{cn: cn}
	driverName := fmt.Sprintf("e2e-%06x.csi-mock.berth.test", rand.IntN(1<<24))
	plugins := filepath.Join(dir, "plugins")
	switch kind {
	case csiMock:
		d, err := cp.StartCSIMockDriver(ctx, addons.CSIMockDriver, cluster.CSIMockDriverOptions{
			DriverName: driverName, RegistryDir: registry, PluginsDir: plugins,
		})
		if err != nil {
			t.Fatalf("starting the CSI mock driver: %v", err)
		}
		cs.driver = &d.CSIPlugin
	case csiHostPath:
		driverName = strings.Replace(driverName, "csi-mock", "csi-hostpath", 1)
		d, err := cp.StartCSIHostPathDriver(ctx, addons.CSIHostPathDriver, cluster.CSIHostPathDriverOptions{
			DriverName: driverName, NodeID: name, StateDir: filepath.Join(dir, "state"),
			RegistryDir: registry, PluginsDir: plugins,
		})
		if err != nil {
			t.Fatalf("starting the CSI host path driver: %v", err)
		}
		cs.driver, cs.stateDir = &d.CSIPlugin, d.StateDir
	}
	stopAfterTest(t, "CSI driver", cs.driver.Log(), cs.driver.Stop)
	if _, err := cp.CreateCSIDriver(ctx, driverName); err != nil {
		t.Fatal(err)
	}
	prov, err := cp.StartCSIProvisioner(ctx, addons.CSIProvisioner, cluster.CSIProvisionerOptions{
		Endpoint: cs.driver.Endpoint, DriverName: driverName,
	})
	if err != nil {
		t.Fatalf("starting the external-provisioner: %v", err)
	}
	stopAfterTest(t, "external-provisioner", prov.Log(), prov.Stop)
	cs.class = "berth-" + strings.SplitN(driverName, ".", 2)[0]
	if _, err := cp.CreateStorageClass(ctx, cs.class, driverName, storagev1.VolumeBindingImmediate); err != nil {
		t.Fatal(err)
	}
	return cs
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
	cs := startCSINode(t, cp, client, "berth-csi", csiMock)
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

// statefulSetYAML is a StatefulSet of one pod with a volume claim template
// of class and a generic ephemeral volume of the same class. The container
// writes a token to the claim's volume on its first start only and counts
// its starts there, and marks its scratch volume.
func statefulSetYAML(class string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: %[2]s
        command: ["sh", "-c", "[ -f /data/token ] || cat /proc/sys/kernel/random/uuid > /data/token; echo $HOSTNAME >> /data/starts; echo scratch > /scratch/mark; sleep 3600"]
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: scratch, mountPath: /scratch}
      volumes:
      - name: scratch
        ephemeral:
          volumeClaimTemplate:
            spec:
              storageClassName: %[1]s
              accessModes: [ReadWriteOnce]
              resources: {requests: {storage: 1Gi}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      storageClassName: %[1]s
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`, class, busybox)
}

// A StatefulSet's pod keeps its data across its deletion: with the host
// path CSI driver (real bind mounts of the driver's directories), its pod
// writes a token to the PVC of its claim template; the pod is deleted, the
// StatefulSet controller makes it again, berth stages and publishes the
// same volume for the new pod, and the token is there, written once. The
// first pod's publication is gone from the host's mounts, and its generic
// ephemeral volume went with it (the driver deleted its directory) while
// the new pod got one of its own.
func TestCSIHostPathStatefulSet(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	cs := startCSINode(t, cp, client, "berth-csi-hp", csiHostPath)
	applyYAML(t, cp, statefulSetYAML(cs.class))
	first := waitClusterPodRunning(t, client, "web-0", 3*time.Minute)
	token := strings.TrimSpace(kubectl(t, cp, "exec", "web-0", "--", "cat", "/data/token"))
	if len(token) != 36 {
		t.Fatalf("token %q: not a UUID", token)
	}
	// The data is the driver's: the container wrote through the mounts.
	written, _ := filepath.Glob(filepath.Join(cs.stateDir, "volumes", "*", "token"))
	if len(written) != 1 {
		t.Fatalf("token files in the driver's state: %v", written)
	}
	if b, err := os.ReadFile(written[0]); err != nil || strings.TrimSpace(string(b)) != token {
		t.Fatalf("the driver's copy of the token: %q, %v; want %q", b, err, token)
	}
	firstScratch := scratchVolumes(t, cs.stateDir)
	if len(firstScratch) != 1 {
		t.Fatalf("scratch volumes in the driver's state: %v", firstScratch)
	}

	kubectl(t, cp, "delete", "pod", "web-0", "--wait=true", "--timeout=90s")
	var second *v1.Pod
	waitFor(t, 3*time.Minute, "web-0 made again and running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(t.Context(), "web-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		second = p
		return p.UID != first.UID && p.Status.Phase == v1.PodRunning && podReady(p), describe(p)
	})
	if got := strings.TrimSpace(kubectl(t, cp, "exec", "web-0", "--", "cat", "/data/token")); got != token {
		t.Errorf("token after the pod was made again: %q, want %q", got, token)
	}
	if starts := strings.Fields(kubectl(t, cp, "exec", "web-0", "--", "cat", "/data/starts")); len(starts) != 2 {
		t.Errorf("starts recorded on the volume: %q, want two", starts)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), string(first.UID)) {
		t.Errorf("a mount of the deleted pod %s is left", first.UID)
	}
	if !strings.Contains(string(mounts), string(second.UID)) {
		t.Errorf("no mount of the new pod %s", second.UID)
	}
	waitFor(t, time.Minute, "the first pod's scratch volume deleted, the new pod's there", func() (bool, string) {
		now := scratchVolumes(t, cs.stateDir)
		return len(now) == 1 && now[0] != firstScratch[0], fmt.Sprintf("%v (the first: %s)", now, firstScratch[0])
	})
}

// scratchVolumes lists the driver's volumes that hold a scratch mark.
func scratchVolumes(t *testing.T, stateDir string) []string {
	t.Helper()
	marks, err := filepath.Glob(filepath.Join(stateDir, "volumes", "*", "mark"))
	if err != nil {
		t.Fatal(err)
	}
	var vols []string
	for _, m := range marks {
		vols = append(vols, filepath.Base(filepath.Dir(m)))
	}
	return vols
}
