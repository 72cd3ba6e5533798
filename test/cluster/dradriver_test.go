package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/berth-dev/berth/test/cluster"
)

// TestDRATestDriver runs the upstream DRA test driver against a real control
// plane, with no node but a Node object: it registers, publishes its
// devices, and prepares a claim allocated to it as a kubelet would ask.
func TestDRATestDriver(t *testing.T) {
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
	t.Run("resource.k8s.io/v1 served", func(t *testing.T) { checkResourceV1Served(t, admin) })

	const node, numDevices = "dra-n1", 3
	// The owner of the driver's ResourceSlices, as a kubelet would have
	// registered it.
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	drv, err := cp.StartDRATestDriver(ctx, addons.DRATestDriver, cluster.DRADriverOptions{
		NodeName:    node,
		RegistryDir: filepath.Join(root, "plugins_registry"),
		PluginsDir:  filepath.Join(root, "plugins"),
		CDIDir:      filepath.Join(root, "cdi"),
		NumDevices:  numDevices,
	})
	if err != nil {
		t.Fatalf("start the DRA test driver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", cp.LogTails(40))
			data, _ := os.ReadFile(drv.Log())
			t.Logf("driver log %s:\n%s", drv.Log(), lastLines(string(data), 60))
		}
		drv.Stop()
	})

	t.Run("registration", func(t *testing.T) { checkDriverRegistration(ctx, t, drv) })
	t.Run("ResourceSlice", func(t *testing.T) { checkDriverSlices(ctx, t, admin, drv, node, numDevices) })
	t.Run("prepare", func(t *testing.T) { checkDriverPrepare(ctx, t, cp, admin, drv, node) })
	t.Run("scheduler allocates", func(t *testing.T) { checkSchedulerAllocates(ctx, t, admin, drv, node) })

	if err := drv.Stop(); err != nil {
		t.Errorf("stop the driver: %v", err)
	}
	// The driver retries what it may not do, so a missing permission shows
	// in its log only.
	if data, err := os.ReadFile(drv.Log()); err != nil || strings.Contains(string(data), "forbidden") {
		t.Errorf("the driver's log (%v) reports a forbidden request:\n%s", err, lastLines(string(data), 60))
	}
	for _, sock := range []string{drv.RegistrationSocket, drv.Endpoint} {
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Stop: %v, want it gone", sock, err)
		}
	}
}

func checkResourceV1Served(t *testing.T, admin kubernetes.Interface) {
	list, err := admin.Discovery().ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatalf("discovery of %s: %v", resourcev1.SchemeGroupVersion, err)
	}
	var got []string
	for _, r := range list.APIResources {
		got = append(got, r.Name)
	}
	for _, want := range []string{"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s serves %v, not %s", resourcev1.SchemeGroupVersion, got, want)
		}
	}
}

// checkDriverRegistration asks the registration socket what the kubelet's
// plugin watcher asks, and tells the driver it is registered.
func checkDriverRegistration(ctx context.Context, t *testing.T, drv *cluster.DRADriver) {
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
	if info.Type != registerapi.DRAPlugin || info.Name != drv.Name || info.Endpoint != drv.Endpoint {
		t.Errorf("GetInfo = type %q, name %q, endpoint %q; want %q, %q, %q",
			info.Type, info.Name, info.Endpoint, registerapi.DRAPlugin, drv.Name, drv.Endpoint)
	}
	if !slices.Contains(info.SupportedVersions, drapb.DRAPluginService) {
		t.Errorf("GetInfo's versions %q lack %s", info.SupportedVersions, drapb.DRAPluginService)
	}
	if _, err := reg.NotifyRegistrationStatus(cctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Errorf("NotifyRegistrationStatus: %v", err)
	}
}

// checkDriverSlices waits for the driver's ResourceSlices of node: one pool
// named after it, numDevices devices, owned by its Node.
func checkDriverSlices(ctx context.Context, t *testing.T, admin kubernetes.Interface, drv *cluster.DRADriver, node string, numDevices int) {
	selector := fields.Set{
		resourcev1.ResourceSliceSelectorNodeName: node,
		resourcev1.ResourceSliceSelectorDriver:   drv.Name,
	}.String()
	var want []string
	for i := range numDevices {
		want = append(want, fmt.Sprintf("device-%02d", i))
	}
	eventually(ctx, t, 2*time.Minute, func(ctx context.Context) error {
		list, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return err
		}
		var got []string
		for _, s := range list.Items {
			if s.Spec.Pool.Name != node || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
				return fmt.Errorf("slice %s: pool %q, nodeName %v; want both %q", s.Name, s.Spec.Pool.Name, s.Spec.NodeName, node)
			}
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].Name != node {
				return fmt.Errorf("slice %s: owners %v, want Node %s", s.Name, s.OwnerReferences, node)
			}
			for _, d := range s.Spec.Devices {
				got = append(got, d.Name)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("%d slices of %s with devices %v, want %v", len(list.Items), node, got, want)
		}
		return nil
	})
}

// checkDriverPrepare allocates a claim of the driver's DeviceClass to node
// (as the scheduler would, written by hand) and prepares and unprepares it
// over the DRA socket, as the kubelet does, reading the CDI spec between.
func checkDriverPrepare(ctx context.Context, t *testing.T, cp *cluster.ControlPlane, admin kubernetes.Interface, drv *cluster.DRADriver, node string) {
	class, err := cp.CreateDeviceClass(ctx, "dra-test", drv.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DeviceClass %s selects %q", class.Name, class.Spec.Selectors[0].CEL.Expression)
	opaque := &resourcev1.OpaqueDeviceConfiguration{Driver: drv.Name, Parameters: runtime.RawExtension{Raw: []byte(`{"greeting":"hello"}`)}}
	claim, err := admin.ResourceV1().ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-1"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}},
			Config:   []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: opaque}}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: drv.Name, Pool: node, Device: "device-01"}},
			Config: []resourcev1.DeviceAllocationConfiguration{{
				Source: resourcev1.AllocationConfigSourceClaim, Requests: []string{"gpu"},
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: opaque},
			}},
		},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}
	if claim, err = admin.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocate the claim: %v", err)
	}

	conn, err := grpc.NewClient("unix:"+drv.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dra := drapb.NewDRAPluginClient(conn)
	ref := []*drapb.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := dra.NodePrepareResources(cctx, &drapb.NodePrepareResourcesRequest{Claims: ref})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	res := resp.Claims[string(claim.UID)]
	if res == nil || res.Error != "" || len(res.Devices) != 1 {
		t.Fatalf("NodePrepareResources = %v, want one device for claim %s", resp, claim.UID)
	}
	dev := res.Devices[0]
	wantID := fmt.Sprintf("%s/test=claim-%s-gpu", drv.Name, claim.UID)
	t.Logf("prepared: requests %q pool %q device %q CDI %q", dev.RequestNames, dev.PoolName, dev.DeviceName, dev.CdiDeviceIds)
	if !slices.Equal(dev.RequestNames, []string{"gpu"}) || dev.PoolName != node || dev.DeviceName != "device-01" || !slices.Equal(dev.CdiDeviceIds, []string{wantID}) {
		t.Errorf("prepared device %v, want request gpu, pool %s, device-01, CDI device %s", dev, node, wantID)
	}
	specPath := filepath.Join(drv.CDIDir, fmt.Sprintf("%s-%s-gpu.json", drv.Name, claim.UID))
	checkCDISpec(t, specPath, drv.Name+"/test", fmt.Sprintf("claim-%s-gpu", claim.UID),
		[]string{"claim_claim_1_gpu=true", "user_greeting=hello"})

	uresp, err := dra.NodeUnprepareResources(cctx, &drapb.NodeUnprepareResourcesRequest{Claims: ref})
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	if r := uresp.Claims[string(claim.UID)]; r == nil || r.Error != "" {
		t.Errorf("NodeUnprepareResources = %v", uresp)
	}
	if _, err := os.Stat(specPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CDI spec %s after unprepare: %v, want it gone", specPath, err)
	}
}

// checkCDISpec reads the spec the driver wrote for a prepared claim: one
// device whose only edits are environment variables.
func checkCDISpec(t *testing.T, path, kind, device string, env []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the driver's CDI spec: %v", err)
	}
	t.Logf("CDI spec %s: %s", filepath.Base(path), data)
	var spec struct {
		CDIVersion string `json:"cdiVersion"`
		Kind       string `json:"kind"`
		Devices    []struct {
			Name           string                     `json:"name"`
			ContainerEdits map[string]json.RawMessage `json:"containerEdits"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatalf("CDI spec %s: %v", path, err)
	}
	if spec.Kind != kind || len(spec.Devices) != 1 || spec.Devices[0].Name != device {
		t.Fatalf("CDI spec %s: kind %q, devices %v; want kind %q, one device %q", path, spec.Kind, spec.Devices, kind, device)
	}
	edits := spec.Devices[0].ContainerEdits
	var gotEnv []string
	if err := json.Unmarshal(edits["env"], &gotEnv); err != nil {
		t.Fatalf("CDI spec %s: env: %v", path, err)
	}
	if !slices.Equal(gotEnv, env) || len(edits) != 1 {
		t.Errorf("CDI spec %s: edits %s, want only env %q", path, data, env)
	}
}

// checkSchedulerAllocates shows that the control plane's kube-scheduler and
// kube-controller-manager do DRA with their default flags: a pod's claim
// from a template is created, allocated a device the driver published, and
// the pod bound to node. node is made to look Ready (no kubelet renews
// it); the pod tolerates every taint, in case the node lifecycle
// controller marks it otherwise first.
func checkSchedulerAllocates(ctx context.Context, t *testing.T, admin kubernetes.Interface, drv *cluster.DRADriver, node string) {
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capacity := v1.ResourceList{v1.ResourcePods: resource.MustParse("10"), v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	now := metav1.Now()
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "Test", LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-device"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dra-test"}}},
		}}},
	}
	if _, err := admin.ResourceV1().ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dra-pod"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "dev"}}}}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: &tmpl.Name}},
			Tolerations:    []v1.Toleration{{Operator: v1.TolerationOpExists}},
		},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0) // no kubelet will confirm the deletion
		_ = admin.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	eventually(ctx, t, 2*time.Minute, func(ctx context.Context) error {
		p, err := admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != node {
			return fmt.Errorf("pod on node %q, conditions %v", p.Spec.NodeName, p.Status.Conditions)
		}
		if len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return fmt.Errorf("pod's claim statuses %v", p.Status.ResourceClaimStatuses)
		}
		name := *p.Status.ResourceClaimStatuses[0].ResourceClaimName
		claim, err := admin.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		a := claim.Status.Allocation
		if a == nil || len(a.Devices.Results) != 1 {
			return fmt.Errorf("claim %s: allocation %v", name, a)
		}
		r := a.Devices.Results[0]
		if r.Driver != drv.Name || r.Pool != node || len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != p.UID {
			return fmt.Errorf("claim %s: result %+v, reserved for %v", name, r, claim.Status.ReservedFor)
		}
		t.Logf("claim %s: device %s/%s/%s, reserved for pod %s", name, r.Driver, r.Pool, r.Device, p.Name)
		return nil
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
