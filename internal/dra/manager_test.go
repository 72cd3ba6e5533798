package dra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const (
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
)

// env is a manager with its drivers, claims and state directory.
type env struct {
	t       *testing.T
	dir     string
	claims  *fakeClaims
	plugins *Plugins
	m       *Manager
}

func newEnv(t *testing.T, claims *fakeClaims, callTimeout time.Duration) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), claims: claims}
	e.restart(callTimeout)
	return e
}

// restart makes a new manager over the same directory, with a new, empty
// plugin registry, as berth after a restart.
func (e *env) restart(callTimeout time.Duration) {
	e.t.Helper()
	if e.plugins != nil {
		e.plugins.Close()
	}
	e.plugins = NewPlugins(testLog(e.t), 0)
	e.t.Cleanup(e.plugins.Close)
	m, err := New(Options{Dir: e.dir, Claims: e.claims, Plugins: e.plugins, CallTimeout: callTimeout, Log: testLog(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.m = m
}

func (e *env) prepare(pod *v1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.m.PrepareResources(ctx, pod)
}

func (e *env) unprepare(pod *v1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.m.UnprepareResources(ctx, pod)
}

// checkpointed reads the checkpoint file as a new manager would.
func (e *env) checkpointed() State {
	e.t.Helper()
	st, err := newFileStore(e.dir).Load()
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) cdi(pod *v1.Pod, ctr int) []string {
	e.t.Helper()
	ids, err := e.m.ContainerCDIDevices(pod, &pod.Spec.Containers[ctr])
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// withContainers gives pod containers referencing claims: each argument is
// the container's claim references, "claim" or "claim/request".
func withContainers(pod *v1.Pod, refs ...[]string) *v1.Pod {
	for i, rs := range refs {
		c := v1.Container{Name: "c" + string(rune('0'+i)), Image: "busybox"}
		for _, r := range rs {
			name, req, _ := strings.Cut(r, "/")
			c.Resources.Claims = append(c.Resources.Claims, v1.ResourceClaim{Name: name, Request: req})
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	return pod
}

func ownedBy(c *metav1.ObjectMeta, pod *v1.Pod) {
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
}

func wantCalls(t *testing.T, d *testDriver, prepared, unprepared []string) {
	t.Helper()
	p, u := d.calls()
	if !reflect.DeepEqual(p, prepared) || !reflect.DeepEqual(u, unprepared) {
		t.Fatalf("driver %s: NodePrepareResources for %q, NodeUnprepareResources for %q; want %q, %q", d.name, p, u, prepared, unprepared)
	}
}

// TestPrepareSharedAndGenerated: a pod with a shared claim and one from a
// template, a second pod sharing the first claim; each claim is prepared
// once, reference-counted, and unprepared when its last pod goes.
func TestPrepareSharedAndGenerated(t *testing.T) {
	p1 := testPod("p1", []v1.PodResourceClaim{named("shared", "shared"), templated("own", "tmpl")}, map[string]string{"own": "p1-own"})
	p1 = withContainers(p1, []string{"shared/gpu"}, []string{"own", "shared/nic"}, nil)
	p2 := withContainers(testPod("p2", []v1.PodResourceClaim{named("s", "shared")}, nil), []string{"s"})
	gen := testClaim("p1-own", "u-own", []string{gpuDriver}, "p1")
	ownedBy(&gen.ObjectMeta, p1)
	e := newEnv(t, newFakeClaims(testClaim("shared", "u-shared", []string{gpuDriver}, "p1", "p2"), gen), 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, e.plugins, d)

	if err := e.prepare(p1); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"shared", "p1-own"}, nil)
	if got, want := e.cdi(p1, 0), []string{cdiID(gpuDriver, "shared", "gpu")}; !reflect.DeepEqual(got, want) {
		t.Errorf("container 0: %q, want %q", got, want)
	}
	want1 := []string{cdiID(gpuDriver, "p1-own", "gpu"), cdiID(gpuDriver, "p1-own", "nic"), cdiID(gpuDriver, "shared", "nic")}
	if got := e.cdi(p1, 1); !reflect.DeepEqual(got, want1) {
		t.Errorf("container 1: %q, want %q", got, want1)
	}
	if got := e.cdi(p1, 2); got != nil {
		t.Errorf("container without claims: %q", got)
	}
	// The checkpoint holds the outcome when PrepareResources returns.
	if st := e.checkpointed(); !st["default/shared"].Prepared || !st["default/p1-own"].Prepared {
		t.Errorf("checkpoint after prepare: %+v", st)
	}

	// Again for p1, then p2: nothing more to prepare.
	if err := e.prepare(p1); err != nil {
		t.Fatal(err)
	}
	if err := e.prepare(p2); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"shared", "p1-own"}, nil)
	if got := e.checkpointed()["default/shared"].Pods; !reflect.DeepEqual(got, []types.UID{"p1", "p2"}) {
		t.Errorf("shared claim's pods: %q", got)
	}

	// p1 goes: its own claim is unprepared, the shared one stays for p2.
	if err := e.unprepare(p1); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"shared", "p1-own"}, []string{"p1-own"})
	if got := e.cdi(p2, 0); !reflect.DeepEqual(got, []string{cdiID(gpuDriver, "shared", "gpu"), cdiID(gpuDriver, "shared", "nic")}) {
		t.Errorf("p2's devices after p1 went: %q", got)
	}
	if err := e.unprepare(p1); err != nil { // again: nothing to do
		t.Fatal(err)
	}
	if err := e.unprepare(p2); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"shared", "p1-own"}, []string{"p1-own", "shared"})
	if st := e.checkpointed(); len(st) != 0 {
		t.Errorf("checkpoint after the last pod: %+v", st)
	}
	if e.m.PodMightNeedToUnprepareResources("p2") {
		t.Error("p2 still uses a claim")
	}
}

// TestPrepareExtendedResourceClaim: a pod whose extended resources the
// scheduler allocated through DRA (status.extendedResourceClaimStatus, no
// spec.resourceClaims) has that claim prepared; each container gets the
// devices of the requests mapped to its own non-zero requests, and the
// claim is unprepared when the pod goes.
func TestPrepareExtendedResourceClaim(t *testing.T) {
	pod := testPod("p1", nil, nil)
	qty := func(n string) v1.ResourceList {
		return v1.ResourceList{"example.com/gpu": resource.MustParse(n), "deviceclass.resource.kubernetes.io/nic-class": resource.MustParse(n)}
	}
	pod.Spec.Containers = []v1.Container{
		{Name: "gpu-user", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}}},
		{Name: "both", Resources: v1.ResourceRequirements{Requests: qty("1")}},
		{Name: "zero", Resources: v1.ResourceRequirements{Requests: qty("0")}},
		{Name: "none"},
	}
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p1-extended-resources",
		RequestMappings: []v1.ContainerExtendedResourceRequest{
			{ContainerName: "gpu-user", ResourceName: "example.com/gpu", RequestName: "gpu"},
			{ContainerName: "both", ResourceName: "example.com/gpu", RequestName: "gpu"},
			{ContainerName: "both", ResourceName: "deviceclass.resource.kubernetes.io/nic-class", RequestName: "nic"},
			{ContainerName: "zero", ResourceName: "example.com/gpu", RequestName: "gpu"},
		}}
	e := newEnv(t, newFakeClaims(testClaim("p1-extended-resources", "u-ext", []string{gpuDriver}, "p1")), 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, e.plugins, d)

	if err := e.prepare(pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"p1-extended-resources"}, nil)
	gpu, nic := cdiID(gpuDriver, "p1-extended-resources", "gpu"), cdiID(gpuDriver, "p1-extended-resources", "nic")
	for i, want := range [][]string{{gpu}, {gpu, nic}, nil, nil} {
		if got := e.cdi(pod, i); !reflect.DeepEqual(got, want) {
			t.Errorf("container %s: %q, want %q", pod.Spec.Containers[i].Name, got, want)
		}
	}
	claims, err := e.m.ContainerClaims(pod, &pod.Spec.Containers[1])
	if err != nil || len(claims) != 1 || claims[0].Name != "p1-extended-resources" {
		t.Errorf("claims of container both: %+v, %v", claims, err)
	}
	if err := e.unprepare(pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"p1-extended-resources"}, []string{"p1-extended-resources"})
	if st := e.checkpointed(); len(st) != 0 {
		t.Errorf("checkpoint after the pod went: %+v", st)
	}
}

// TestPrepareTwoDrivers: one call per driver for all the pod's claims,
// and a claim allocated from both drivers gets devices of both.
func TestPrepareTwoDrivers(t *testing.T) {
	pod := withContainers(testPod("p1", []v1.PodResourceClaim{named("a", "both"), named("b", "gpu-only"), named("c", "nic-only")}, nil), []string{"a"})
	e := newEnv(t, newFakeClaims(
		testClaim("both", "u-both", []string{gpuDriver, nicDriver}, "p1"),
		testClaim("gpu-only", "u-gpu", []string{gpuDriver}, "p1"),
		testClaim("nic-only", "u-nic", []string{nicDriver}, "p1"),
	), 0)
	dir := shortTempDir(t)
	gpu, nic := startDriver(t, dir, "gpu.sock", gpuDriver), startDriver(t, dir, "nic.sock", nicDriver)
	register(t, e.plugins, gpu)
	register(t, e.plugins, nic)
	if err := e.prepare(pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, gpu, []string{"both", "gpu-only"}, nil)
	wantCalls(t, nic, []string{"both", "nic-only"}, nil)
	got := e.cdi(pod, 0)
	for _, id := range []string{cdiID(gpuDriver, "both", "gpu"), cdiID(nicDriver, "both", "gpu")} {
		if !slices.Contains(got, id) {
			t.Errorf("devices %q lack %s", got, id)
		}
	}
	if err := e.unprepare(pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, gpu, []string{"both", "gpu-only"}, []string{"both", "gpu-only"})
	wantCalls(t, nic, []string{"both", "nic-only"}, []string{"both", "nic-only"})
}

// TestPrepareDriverFailures: a driver that fails a claim, hangs, skips a
// claim or answers about a claim it was not asked for: the error names the
// claim and the driver, the claim is not prepared (no devices for the
// container), and once the driver behaves the pod is prepared with one
// more call. A pod that goes before that still has its claim unprepared,
// since the driver may have done part of the work.
func TestPrepareDriverFailures(t *testing.T) {
	tests := []struct {
		mode    string
		wantErr []string
	}{
		{modeFail, []string{"DRA driver gpu.example.com: NodePrepareResources failed for ResourceClaim c1: device c1 is on fire"}},
		{modeHang, []string{"DRA driver gpu.example.com: NodePrepareResources for ResourceClaims [c1]", "DeadlineExceeded"}},
		{modeOmit, []string{"DRA driver gpu.example.com: NodePrepareResources skipped ResourceClaim c1"}},
		{modeUnknown, []string{"DRA driver gpu.example.com: NodePrepareResources returned result for unknown claim UID not-asked-for"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			pod := withContainers(testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil), []string{"c"})
			// The hang ends at the call timeout; the other modes answer
			// at once.
			e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1")), 200*time.Millisecond)
			d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
			register(t, e.plugins, d)
			d.setModes(tt.mode, modeGood)

			err := e.prepare(pod)
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v, want one containing %q", err, w)
				}
			}
			if st := e.checkpointed(); st["default/c1"].Prepared || len(st["default/c1"].Devices) != 0 {
				t.Errorf("failed claim recorded as prepared: %+v", st)
			}
			if _, err := e.m.ContainerCDIDevices(pod, &pod.Spec.Containers[0]); err == nil {
				t.Error("devices of an unprepared claim")
			}

			d.setModes(modeGood, modeGood)
			if err := e.prepare(pod); err != nil {
				t.Fatalf("retry: %v", err)
			}
			wantCalls(t, d, []string{"c1", "c1"}, nil)
			if got := e.cdi(pod, 0); len(got) != 2 {
				t.Errorf("devices after the retry: %q", got)
			}
			if err := e.prepare(pod); err != nil {
				t.Fatal(err)
			}
			wantCalls(t, d, []string{"c1", "c1"}, nil) // never prepared twice once done
		})
	}
}

// TestUnprepareAfterFailedPrepare: a pod deleted after its prepare failed
// has its claim unprepared (the driver may hold part of it), and a failed
// unprepare is retried by the next call.
func TestUnprepareAfterFailedPrepare(t *testing.T) {
	pod := testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil)
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1")), 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, e.plugins, d)
	d.setModes(modeFail, modeFail)
	if err := e.prepare(pod); err == nil {
		t.Fatal("prepare succeeded with a failing driver")
	}
	err := e.unprepare(pod)
	if err == nil || !strings.Contains(err.Error(), "DRA driver gpu.example.com: NodeUnprepareResources failed for ResourceClaim c1: device c1 is stuck") {
		t.Fatalf("unprepare error %v", err)
	}
	if !e.m.PodMightNeedToUnprepareResources("p1") || len(e.checkpointed()) != 1 {
		t.Fatal("claim forgotten although its unprepare failed")
	}
	d.setModes(modeGood, modeOmit)
	if err := e.unprepare(pod); err == nil || !strings.Contains(err.Error(), "NodeUnprepareResources skipped ResourceClaim c1") {
		t.Fatalf("unprepare error %v", err)
	}
	d.setModes(modeGood, modeGood)
	if err := e.unprepare(pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"c1"}, []string{"c1", "c1", "c1"})
	if len(e.checkpointed()) != 0 || e.m.PodMightNeedToUnprepareResources("p1") {
		t.Error("claim kept after its unprepare")
	}
}

// TestPrepareRefused: what the kubelet refuses before touching anything:
// the pod then has nothing to unprepare and no driver was called.
func TestPrepareRefused(t *testing.T) {
	notAlloc := testClaim("c1", "u-c1", nil, "p1")
	tests := []struct {
		name     string
		pod      *v1.Pod
		register bool
		wantErr  string
	}{
		{name: "driver not registered", pod: testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil),
			wantErr: "prepare dynamic resources: ResourceClaim c1: DRA driver gpu.example.com is not registered"},
		{name: "not reserved for the pod", pod: testPod("p9", []v1.PodResourceClaim{named("c", "c1")}, nil), register: true,
			wantErr: "prepare dynamic resources: pod pod-p9 (p9) is not allowed to use ResourceClaim c1 (u-c1)"},
		{name: "claim missing", pod: testPod("p1", []v1.PodResourceClaim{named("c", "nope")}, nil), register: true,
			wantErr: `prepare dynamic resources: fetch ResourceClaim nope: resourceclaims.resource.k8s.io "nope" not found`},
		{name: "not allocated", pod: testPod("p1", []v1.PodResourceClaim{named("c", "unallocated")}, nil), register: true,
			wantErr: "prepare dynamic resources: ResourceClaim unallocated: not allocated"},
		{name: "generated claim not created yet", pod: testPod("p1", []v1.PodResourceClaim{templated("c", "t")}, nil), register: true,
			wantErr: `prepare dynamic resources: pod "default/pod-p1": ResourceClaim not created yet`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			un := notAlloc.DeepCopy()
			un.Name = "unallocated"
			e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1"), un), 0)
			d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
			if tt.register {
				register(t, e.plugins, d)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := e.m.CheckResources(ctx, tt.pod); errString(err) != tt.wantErr {
				t.Fatalf("CheckResources: error %q, want %q", errString(err), tt.wantErr)
			}
			if err := e.prepare(tt.pod); errString(err) != tt.wantErr {
				t.Fatalf("error %q, want %q", errString(err), tt.wantErr)
			}
			wantCalls(t, d, nil, nil)
			if len(e.m.Claims()) != 0 || e.m.PodMightNeedToUnprepareResources(tt.pod.UID) {
				t.Errorf("refused pod recorded: %+v", e.m.Claims())
			}
			if _, err := os.Stat(filepath.Join(e.dir, CheckpointFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("checkpoint written for a refused pod: %v", err)
			}
		})
	}
}

// TestClaimReplacedWhilePrepared: a pod force-deleted with its claim, the
// claim made again under its name for a new pod while the old one is still
// prepared (its unprepare failing): CheckResources and PrepareResources
// both refuse the new pod with the kubelet's words, without a driver call
// or a change to the checkpoint; CheckResources accepts a pod that can be
// prepared and records nothing for it.
func TestClaimReplacedWhilePrepared(t *testing.T) {
	old := testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil)
	claims := newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1"))
	e := newEnv(t, claims, 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, e.plugins, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.m.CheckResources(ctx, old); err != nil {
		t.Fatalf("CheckResources of a pod that can be prepared: %v", err)
	}
	if len(e.m.Claims()) != 0 {
		t.Fatalf("CheckResources recorded %+v", e.m.Claims())
	}
	if err := e.prepare(old); err != nil {
		t.Fatal(err)
	}
	before := e.checkpointed()

	claims.mu.Lock()
	claims.claims[claimKey("default", "c1")] = testClaim("c1", "u-c2", []string{gpuDriver}, "p2")
	claims.mu.Unlock()
	successor := testPod("p2", []v1.PodResourceClaim{named("c", "c1")}, nil)
	want := "prepare dynamic resources: old ResourceClaim with same name c1 and different UID u-c1 still exists (previous pod force-deleted?!)"
	if err := e.m.CheckResources(ctx, successor); errString(err) != want {
		t.Errorf("CheckResources: error %q, want %q", errString(err), want)
	}
	if err := e.prepare(successor); errString(err) != want {
		t.Errorf("PrepareResources: error %q, want %q", errString(err), want)
	}
	wantCalls(t, d, []string{"c1"}, nil)
	if got := e.checkpointed(); !reflect.DeepEqual(got, before) {
		t.Errorf("checkpoint changed to %+v, was %+v", got, before)
	}
}

// TestRestart: a new manager from the checkpoint neither prepares the
// claims again nor forgets them: it gives the same devices and unprepares
// when the pod goes.
func TestRestart(t *testing.T) {
	pod := withContainers(testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil), []string{"c/gpu"})
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1")), 0)
	dir := shortTempDir(t)
	d := startDriver(t, dir, "gpu.sock", gpuDriver)
	register(t, e.plugins, d)
	if err := e.prepare(pod); err != nil {
		t.Fatal(err)
	}
	before := e.cdi(pod, 0)

	e.restart(0)
	if got := e.cdi(pod, 0); !reflect.DeepEqual(got, before) {
		t.Errorf("devices after restart %q, before %q", got, before)
	}
	if got := e.m.PodUIDs(); !reflect.DeepEqual(got, []types.UID{"p1"}) {
		t.Errorf("pods after restart: %q", got)
	}
	register(t, e.plugins, d) // the driver registers again
	if err := e.prepare(pod); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"c1"}, nil)

	e.restart(0)
	register(t, e.plugins, d)
	if err := e.m.UnpreparePod(context.Background(), "p1"); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"c1"}, []string{"c1"})
	e.restart(0)
	if len(e.m.Claims()) != 0 {
		t.Errorf("claims after unprepare and restart: %+v", e.m.Claims())
	}
}

// TestCorruptCheckpointRefusesStart: a manager does not start over a
// checkpoint it cannot trust, and says which file.
func TestCorruptCheckpointRefusesStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, CheckpointFile)
	if err := os.WriteFile(path, []byte(`{"version":1,"checksum":"00","claims":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Dir: dir, Claims: newFakeClaims(), Plugins: NewPlugins(nil, 0)})
	if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want a corrupt checkpoint naming %s", err, path)
	}
}

// TestSharedClaimPreparedOnceConcurrently: while a driver prepares a claim
// for one pod, another pod using it is told to try again, not given a
// second NodePrepareResources; afterwards it needs none.
func TestSharedClaimPreparedOnceConcurrently(t *testing.T) {
	p1 := testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil)
	p2 := testPod("p2", []v1.PodResourceClaim{named("c", "c1")}, nil)
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1", "p2")), 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, e.plugins, d)
	d.setModes(modeBlock, modeGood)

	first := make(chan error, 1)
	go func() { first <- e.prepare(p1) }()
	<-d.called // p1's call is in the driver
	err := e.prepare(p2)
	if err == nil || !strings.Contains(err.Error(), "ResourceClaim c1 is being prepared or unprepared for another pod; try again") {
		t.Fatalf("second pod: %v", err)
	}
	if err := e.unprepare(p1); err == nil {
		t.Fatal("unprepare during the prepare succeeded")
	}
	close(d.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := e.prepare(p2); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"c1"}, nil)
}

// TestCrashDuringPrepare: the pod's use of a claim is checkpointed before
// the driver is called, so berth killed during NodePrepareResources comes
// back knowing the claim (not prepared) and unprepares it when the pod
// is gone, instead of leaking what the driver may have done.
func TestCrashDuringPrepare(t *testing.T) {
	pod := testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil)
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1")), 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, e.plugins, d)
	d.setModes(modeBlock, modeGood)
	first := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { first <- e.m.PrepareResources(ctx, pod) }()
	<-d.called
	if c := e.checkpointed()["default/c1"]; c.Prepared || !reflect.DeepEqual(c.Pods, []types.UID{"p1"}) {
		t.Fatalf("checkpoint during the driver call: %+v", c)
	}

	// A new manager over the same directory, as after kill -9; the old
	// one's call is left hanging in the driver until the end, then
	// canceled, which changes nothing it recorded.
	dir := e.dir
	after, err := New(Options{Dir: dir, Claims: e.claims, Plugins: e.plugins, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !after.PodMightNeedToUnprepareResources("p1") {
		t.Fatal("claim forgotten by the restart")
	}
	if _, err := after.ContainerCDIDevices(pod, &v1.Container{Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "c"}}}}); err == nil {
		t.Error("devices of a claim whose prepare never finished")
	}
	if err := after.UnpreparePod(context.Background(), "p1"); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, []string{"c1"}, []string{"c1"})
	if len(e.checkpointed()) != 0 {
		t.Errorf("checkpoint after the unprepare: %+v", e.checkpointed())
	}
	cancel()
	if err := <-first; err == nil {
		t.Error("the canceled prepare succeeded")
	}
	if len(e.checkpointed()) != 0 {
		t.Errorf("the canceled prepare wrote the checkpoint: %+v", e.checkpointed())
	}
}

// failingStore fails its Save calls while fail is set.
type failingStore struct {
	*fileStore
	fail bool
}

func (s *failingStore) Save(st State) error {
	if s.fail {
		return errors.New("disk full")
	}
	return s.fileStore.Save(st)
}

// TestCheckpointWriteFails: a prepare whose outcome cannot be
// checkpointed is an error and is not recorded as prepared; the next call
// prepares again (drivers must accept that; berth cannot know).
func TestCheckpointWriteFails(t *testing.T) {
	pod := withContainers(testPod("p1", []v1.PodResourceClaim{named("c", "c1")}, nil), []string{"c"})
	e := newEnv(t, newFakeClaims(testClaim("c1", "u-c1", []string{gpuDriver}, "p1")), 0)
	d := startDriver(t, shortTempDir(t), "gpu.sock", gpuDriver)
	register(t, e.plugins, d)
	fs := &failingStore{fileStore: newFileStore(e.dir), fail: true}
	m, err := newManager(Options{Claims: e.claims, Log: testLog(t)}, e.plugins, fs)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	if err := e.prepare(pod); err == nil || !strings.Contains(err.Error(), "checkpoint ResourceClaim state: disk full") {
		t.Fatalf("error %v", err)
	}
	wantCalls(t, d, nil, nil) // the pod's use could not be recorded: no driver call
	if m.PodMightNeedToUnprepareResources("p1") {
		t.Error("unrecorded use kept in memory")
	}
	fs.fail = false
	if err := e.prepare(pod); err != nil {
		t.Fatal(err)
	}
	if got := e.cdi(pod, 0); len(got) != 2 {
		t.Errorf("devices %q", got)
	}
}
