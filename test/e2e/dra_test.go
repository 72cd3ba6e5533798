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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/test/cluster"
)

// cdiSpecDir is where containerd 2 reads CDI specs by default (besides
// /etc/cdi): the DRA test driver writes its specs there. Each test's driver
// has a name of its own, which every spec file it writes begins with, so
// that the test removes only its own.
const cdiSpecDir = "/var/run/cdi"

// draNode is a cluster node on containerd 2 with the upstream DRA test
// driver registered with it.
type draNode struct {
	cn     *clusterNode
	driver *cluster.DRADriver
	class  string
}

// startDRANode starts berth (containerd 2) as node name of cp with its
// plugin registration directory in a directory of the test's, the DRA test
// driver for it under a name of the test's own, and a DeviceClass of that
// driver's devices.
func startDRANode(t *testing.T, cp *cluster.ControlPlane, client kubernetes.Interface, name string) *draNode {
	t.Helper()
	addons := nodePluginAddons(t)
	dir, registry := pluginSocketsDir(t, "berth-dra-")
	cn := startClusterNodeOn(t, cp, name, containerd2Dir(t), "--plugin-registration-dir", registry)
	waitNodeReady(t, client, name, true, 90*time.Second)

	driverName := fmt.Sprintf("e2e-%06x.test-driver.cdi.k8s.io", rand.IntN(1<<24))
	_, statErr := os.Stat(cdiSpecDir)
	t.Cleanup(func() {
		removeCDISpecs(t, driverName)
		if os.IsNotExist(statErr) {
			os.Remove(cdiSpecDir) // made for the test; only if empty
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	d, err := cp.StartDRATestDriver(ctx, addons.DRATestDriver, cluster.DRADriverOptions{
		NodeName: name, RegistryDir: registry, PluginsDir: filepath.Join(dir, "plugins"),
		CDIDir: cdiSpecDir, NumDevices: 2, DriverName: driverName,
	})
	if err != nil {
		t.Fatalf("starting the DRA test driver: %v", err)
	}
	stopAfterTest(t, "DRA test driver", d.Log(), d.Stop)
	class := "berth-" + strings.SplitN(driverName, ".", 2)[0]
	if _, err := cp.CreateDeviceClass(ctx, class, driverName); err != nil {
		t.Fatal(err)
	}
	return &draNode{cn: cn, driver: d, class: class}
}

// removeCDISpecs removes what driver left in cdiSpecDir.
func removeCDISpecs(t *testing.T, driver string) {
	left, _ := filepath.Glob(filepath.Join(cdiSpecDir, driver+"-*.json"))
	for _, f := range left {
		t.Logf("removing a CDI spec the driver left: %s", f)
		os.Remove(f)
	}
}

// draClaimYAML is a ResourceClaim of one device of class with an opaque
// config for driver, and a pod that uses it in one container (printing its
// environment) beside one that does not.
func draClaimYAML(class, driver string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu}
spec:
  devices:
    requests:
    - name: one
      exactly: {deviceClassName: %[1]s}
    config:
    - opaque:
        driver: %[2]s
        parameters: {"color": "blue"}
---
apiVersion: v1
kind: Pod
metadata: {name: dra}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims:
  - {name: gpu, resourceClaimName: gpu}
  containers:
  - name: main
    image: %[3]s
    command: ["sh", "-c", "env | sort; sleep 3600"]
    resources: {claims: [{name: gpu}]}
  - name: plain
    image: %[3]s
    command: ["sh", "-c", "env | sort; sleep 3600"]
`, class, driver, busybox)
}

// A ResourceClaim of the DRA test driver's class is allocated by
// kube-scheduler to the berth node; berth has the driver prepare it before
// the sandbox, the container that references it sees the environment the
// driver's CDI spec injects (the other container does not), and the
// pod-resources API lists the device. A berth killed with SIGKILL and
// started again neither prepares the claim again nor loses it; deleting
// the pod unprepares it (the driver's CDI spec is gone) and the claim is
// released.
func TestDRAClusterTestDriver(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	dn := startDRANode(t, cp, client, "berth-dra")
	dn.waitSlice(t, client, true)
	applyYAML(t, cp, draClaimYAML(dn.class, dn.driver.Name))
	pod := waitClusterPodRunning(t, client, "dra", 3*time.Minute)
	if pod.Spec.NodeName != "berth-dra" {
		t.Fatalf("scheduled to %q", pod.Spec.NodeName)
	}
	claim, err := client.ResourceV1().ResourceClaims("default").Get(t.Context(), "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim not allocated: %+v", claim.Status)
	}
	device := claim.Status.Allocation.Devices.Results[0].Device

	// The driver's CDI spec sets claim_<claim>_<request>=true and the
	// claim's parameters, prefixed user_.
	waitFor(t, time.Minute, "main's environment", func() (bool, string) {
		out, _, _ := cp.Kubectl(t.Context(), "logs", "dra", "-c", "main")
		return strings.Contains(out, "claim_gpu_one=true") && strings.Contains(out, "user_color=blue"), out
	})
	if out := kubectl(t, cp, "logs", "dra", "-c", "plain"); strings.Contains(out, "claim_gpu_one") || strings.Contains(out, "user_color") {
		t.Errorf("plain, which references no claim, got the claim's environment:\n%s", out)
	}
	wantPodResourcesDevice(t, dn.cn, "dra", "main", dn.driver.Name, device)
	specs, _ := filepath.Glob(filepath.Join(cdiSpecDir, dn.driver.Name+"-*.json"))
	if len(specs) != 1 {
		t.Fatalf("CDI specs of the driver: %v, want one", specs)
	}
	prepared := strings.Count(dn.cn.berthLog(), `"msg":"NodePrepareResources"`)

	// kill -9 and a new berth: the pod keeps running, nothing is
	// prepared again, and the claim is still known.
	dn.cn.kill9()
	dn.cn.start()
	waitFor(t, time.Minute, "the pod running again on the new berth", func() (bool, string) {
		for _, p := range dn.cn.pods() {
			if p.UID == pod.UID {
				return p.Status.Phase == v1.PodRunning, string(p.Status.Phase)
			}
		}
		return false, "not shown"
	})
	wantPodResourcesDevice(t, dn.cn, "dra", "main", dn.driver.Name, device)
	if p := waitClusterPodRunning(t, client, "dra", time.Minute); statusOf(p, "main").RestartCount != 0 {
		t.Errorf("main restarted across berth's restart: %+v", statusOf(p, "main"))
	}
	if n := strings.Count(dn.cn.berthLog(), `"msg":"NodePrepareResources"`); n != prepared {
		t.Errorf("NodePrepareResources called %d times after the restart, %d before", n, prepared)
	}
	// berth deleted the node's slices as it started (no driver had
	// registered yet); the driver, registered again, publishes them again.
	if !strings.Contains(dn.cn.berthLog(), "deleted the node's ResourceSlices of a driver not registered") {
		t.Error("berth did not delete the node's ResourceSlices as it started")
	}
	dn.waitSlice(t, client, true)

	// Deleted: unprepared once its containers stopped, the claim released.
	kubectl(t, cp, "delete", "pod", "dra", "--wait=true", "--timeout=90s")
	waitFor(t, time.Minute, "the CDI spec removed by NodeUnprepareResources", func() (bool, string) {
		left, _ := filepath.Glob(filepath.Join(cdiSpecDir, dn.driver.Name+"-*.json"))
		return len(left) == 0, fmt.Sprint(left)
	})
	if n := strings.Count(dn.cn.berthLog(), `"msg":"NodeUnprepareResources"`); n != 1 {
		t.Errorf("NodeUnprepareResources called %d times, want once", n)
	}
	waitFor(t, time.Minute, "the claim released", func() (bool, string) {
		c, err := client.ResourceV1().ResourceClaims("default").Get(t.Context(), "gpu", metav1.GetOptions{})
		if err != nil {
			return apierrors.IsNotFound(err), err.Error()
		}
		return len(c.Status.ReservedFor) == 0, fmt.Sprintf("reserved for %v", c.Status.ReservedFor)
	})

	// A driver gone for good: its slices go 30 s after its registration.
	if err := dn.driver.Stop(); err != nil {
		t.Fatal(err)
	}
	dn.waitSlice(t, client, false)
}

// waitSlice waits until the driver's ResourceSlice of the node is there
// with its 2 devices (present), or gone.
func (dn *draNode) waitSlice(t *testing.T, client kubernetes.Interface, present bool) {
	t.Helper()
	what := "the driver's ResourceSlice"
	if !present {
		what += " deleted"
	}
	waitFor(t, 90*time.Second, what, func() (bool, string) {
		slices, err := client.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slices.Items {
			if s.Spec.Driver == dn.driver.Name && s.Spec.NodeName != nil && *s.Spec.NodeName == dn.cn.name {
				return present && len(s.Spec.Devices) == 2, fmt.Sprintf("%d devices", len(s.Spec.Devices))
			}
		}
		return !present, fmt.Sprintf("%d slices, none of the driver's", len(slices.Items))
	})
}

// waitClusterPodRunning waits for API pod default/name to be Running and
// ready, and returns it.
func waitClusterPodRunning(t *testing.T, client kubernetes.Interface, name string, timeout time.Duration) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	waitFor(t, timeout, name+" running", func() (bool, string) {
		var err error
		p, err = client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning && podReady(p), describe(p)
	})
	return p
}

// wantPodResourcesDevice checks that the pod-resources API lists the claim
// device of driver for container of pod.
func wantPodResourcesDevice(t *testing.T, cn *clusterNode, pod, container, driver, device string) {
	t.Helper()
	list := cn.listPodResources().PodResources
	for _, pr := range list {
		if pr.Name != pod {
			continue
		}
		for _, c := range pr.Containers {
			if c.Name != container {
				continue
			}
			for _, dr := range c.DynamicResources {
				for _, cr := range dr.ClaimResources {
					if cr.DriverName == driver && cr.DeviceName == device && len(cr.CdiDevices) == 1 {
						return
					}
				}
			}
			t.Fatalf("pod-resources: %s/%s lists %v, not device %s of %s", pod, container, c.DynamicResources, device, driver)
		}
	}
	var local []string
	for _, p := range cn.pods() {
		local = append(local, p.Namespace+"/"+p.Name+" "+string(p.Status.Phase))
	}
	t.Fatalf("pod-resources lists no container %s/%s: %v (berth's pods: %v)", pod, container, list, local)
}

// A pod whose claim the scheduler allocated while its driver is away (it
// crashed, and its slice has not gone yet) waits: berth posts the
// kubelet's FailedPrepareDynamicResources event, creates no sandbox, and
// tries again with a back-off; a pod beside it without claims runs; once
// the driver is back the pod starts, its claim prepared once.
func TestDRADriverAwayPodWaits(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	dn := startDRANode(t, cp, client, "berth-dra-away")
	dn.waitSlice(t, client, true)
	if err := dn.driver.Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the driver deregistered", func() (bool, string) {
		return strings.Contains(dn.cn.berthLog(), "deregistered DRA driver"), "not yet"
	})
	// Within the 30 s its slice outlives it.
	applyYAML(t, cp, draClaimYAML(dn.class, dn.driver.Name))
	applyYAML(t, cp, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: beside}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: %s, command: ["sleep", "3600"]}
`, busybox))
	waitClusterPodRunning(t, client, "beside", 2*time.Minute)
	var failed v1.Event
	waitFor(t, time.Minute, "FailedPrepareDynamicResources", func() (bool, string) {
		list, err := client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=dra"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "FailedPrepareDynamicResources" {
				failed = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	if !strings.Contains(failed.Message, "Failed to prepare dynamic resources") || !strings.Contains(failed.Message, dn.driver.Name) {
		t.Errorf("event message %q", failed.Message)
	}
	p, err := client.CoreV1().Pods("default").Get(t.Context(), "dra", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != v1.PodPending {
		t.Fatalf("pod %s while its driver is away", p.Status.Phase)
	}
	if sbs := dn.cn.sandboxes(string(p.UID)); len(sbs) != 0 {
		t.Fatalf("%d sandboxes made for a pod whose claims are not prepared", len(sbs))
	}

	// The driver comes back (its registration socket in the same place).
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	back, err := cp.StartDRATestDriver(ctx, nodePluginAddons(t).DRATestDriver, cluster.DRADriverOptions{
		NodeName: dn.cn.name, RegistryDir: filepath.Dir(dn.driver.RegistrationSocket),
		PluginsDir: filepath.Dir(filepath.Dir(dn.driver.Endpoint)), CDIDir: cdiSpecDir, NumDevices: 2,
		DriverName: dn.driver.Name,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopAfterTest(t, "DRA test driver, back", back.Log(), back.Stop)
	waitClusterPodRunning(t, client, "dra", 3*time.Minute)
	waitFor(t, time.Minute, "main's environment", func() (bool, string) {
		out, _, _ := cp.Kubectl(t.Context(), "logs", "dra", "-c", "main")
		return strings.Contains(out, "claim_gpu_one=true"), out
	})
	if n := strings.Count(dn.cn.berthLog(), `"msg":"NodePrepareResources"`); n != 1 {
		t.Errorf("NodePrepareResources answered %d times, want once", n)
	}
}

// A pod that ran to completion holds its claim no more: berth unprepares
// it (the driver's CDI spec goes) while the pod object is still there, as
// the kubelet does once a pod is terminal. Its claim comes from a
// ResourceClaimTemplate: the resource claim controller records the claim
// it made in the pod's status.resourceClaimStatuses, which berth's status
// patches must keep (the API server refuses a node's patch that drops
// them, so the pod never showed Succeeded before berth kept them).
func TestDRACompletedPodUnprepared(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	dn := startDRANode(t, cp, client, "berth-dra-done")
	dn.waitSlice(t, client, true)
	applyYAML(t, cp, fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu}
spec:
  spec:
    devices:
      requests:
      - name: one
        exactly: {deviceClassName: %s}
---
apiVersion: v1
kind: Pod
metadata: {name: done}
spec:
  restartPolicy: Never
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: gpu}
  containers:
  - name: main
    image: %s
    # The driver names its variable after the claim the controller made.
    command: ["sh", "-c", "env | grep -q '^claim_done_gpu_[a-z0-9]*_one=true$'"]
    resources: {claims: [{name: gpu}]}
`, dn.class, busybox))
	waitFor(t, 3*time.Minute, "done Succeeded (it saw its claim's environment)", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(t.Context(), "done", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodSucceeded && len(p.Status.ResourceClaimStatuses) == 1, describe(p)
	})
	waitFor(t, 2*time.Minute, "the completed pod's claim unprepared", func() (bool, string) {
		left, _ := filepath.Glob(filepath.Join(cdiSpecDir, dn.driver.Name+"-*.json"))
		return len(left) == 0 && strings.Contains(dn.cn.berthLog(), `"msg":"NodeUnprepareResources"`), fmt.Sprint(left)
	})
	if _, err := client.CoreV1().Pods("default").Get(t.Context(), "done", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod is gone: %v", err)
	}
}

// A pod that asks for its DeviceClass's implicit extended resource
// (deviceclass.resource.kubernetes.io/<class>, KEP-5004) rather than a
// ResourceClaim: kube-scheduler allocates a device through a claim it makes
// for the pod (status.extendedResourceClaimStatus); berth admits the pod
// although the node lists no such resource and no device plugin serves it,
// has the driver prepare that claim, and gives the container that asked
// the environment the driver's CDI spec injects for its request (the other
// container none); the pod-resources API lists the device. Deleted, the
// claim is unprepared once.
func TestDRAExtendedResource(t *testing.T) {
	cp, client, _ := startControlPlane(t)
	dn := startDRANode(t, cp, client, "berth-dra-ext")
	dn.waitSlice(t, client, true)
	applyYAML(t, cp, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: ext}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %[1]s
    command: ["sh", "-c", "env | sort; sleep 3600"]
    resources:
      limits: {deviceclass.resource.kubernetes.io/%[2]s: 1}
  - name: plain
    image: %[1]s
    command: ["sh", "-c", "env | sort; sleep 3600"]
`, busybox, dn.class))
	pod := waitClusterPodRunning(t, client, "ext", 3*time.Minute)
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil || len(st.RequestMappings) != 1 || st.RequestMappings[0].ContainerName != "main" {
		t.Fatalf("extendedResourceClaimStatus %+v, want one request of main", st)
	}
	claim, err := client.ResourceV1().ResourceClaims("default").Get(t.Context(), st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("the scheduler's claim is not allocated: %+v", claim.Status)
	}
	// The driver names its variable claim_<claim>_<request>, dashes made
	// underscores.
	want := "claim_" + strings.ReplaceAll(st.ResourceClaimName+"_"+st.RequestMappings[0].RequestName, "-", "_") + "=true"
	waitFor(t, time.Minute, "main's environment", func() (bool, string) {
		out, _, _ := cp.Kubectl(t.Context(), "logs", "ext", "-c", "main")
		return strings.Contains(out, want), out
	})
	if out := kubectl(t, cp, "logs", "ext", "-c", "plain"); strings.Contains(out, "claim_") {
		t.Errorf("plain, which asked for nothing, got the claim's environment:\n%s", out)
	}
	wantPodResourcesDevice(t, dn.cn, "ext", "main", dn.driver.Name, claim.Status.Allocation.Devices.Results[0].Device)

	kubectl(t, cp, "delete", "pod", "ext", "--wait=true", "--timeout=90s")
	waitFor(t, time.Minute, "the CDI spec removed by NodeUnprepareResources", func() (bool, string) {
		left, _ := filepath.Glob(filepath.Join(cdiSpecDir, dn.driver.Name+"-*.json"))
		return len(left) == 0, fmt.Sprint(left)
	})
	if n := strings.Count(dn.cn.berthLog(), `"msg":"NodeUnprepareResources"`); n != 1 {
		t.Errorf("NodeUnprepareResources called %d times, want once", n)
	}
}
