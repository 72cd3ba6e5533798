package csi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

const testDriver = "hostpath.csi.k8s.io"

type podEnv struct {
	*env
	client *fake.Clientset
	pv     *PodVolumes
	d      *fakeDriver
	owned  []string // the ownership calls: target paths
	mu     sync.Mutex
	ownErr error
}

// newPodEnv is PodVolumes over a fake API holding objs, with a registered
// fake driver that stages.
func newPodEnv(t *testing.T, objs ...runtime.Object) *podEnv {
	t.Helper()
	e := &podEnv{env: newEnv(t, 10*time.Second), client: fake.NewClientset(objs...)}
	e.d = e.driver(t, testDriver, rpcStage)
	register(t, e.m, e.d)
	e.pv = e.podVolumes(t, e.m)
	return e
}

func (e *podEnv) podVolumes(t *testing.T, m *Manager) *PodVolumes {
	t.Helper()
	pv, err := NewPodVolumes(PodVolumesOptions{Manager: m, Client: e.client, NodeName: testNode,
		Ownership: func(dir string, gid int64, readOnly bool) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.owned = append(e.owned, dir)
			return e.ownErr
		}})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

func testPod(uid types.UID, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + string(uid), Namespace: "default", UID: uid},
		Spec: v1.PodSpec{Volumes: vols, ServiceAccountName: "default"}}
}

func claimVolume(name, claim string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func boundClaim(name, pvName string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: pvName}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
}

func csiVolume(name, claim, handle string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
		ClaimRef:    &v1.ObjectReference{Namespace: "default", Name: claim, UID: types.UID("uid-" + claim)},
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
			Driver: testDriver, VolumeHandle: handle, FSType: "ext4"}},
	}}
}

func noAttach(modes ...storagev1.VolumeLifecycleMode) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true), VolumeLifecycleModes: modes}}
}

func TestPodVolumesClaimLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t, boundClaim("data", "pv1"), csiVolume("pv1", "data", "h1"), noAttach())
	a := testPod("a", claimVolume("v", "data"))
	b := testPod("b", claimVolume("v", "data"))
	path, err := e.pv.SetUp(ctx, a, &a.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if path != PublishPath(e.root, "a", "pv1") {
		t.Errorf("path %s", path)
	}
	reads := len(e.client.Actions())
	if _, err := e.pv.SetUp(ctx, a, &a.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if n := len(e.client.Actions()); n != reads {
		t.Errorf("a second SetUp read the API again (%d actions, then %d)", reads, n)
	}
	if _, err := e.pv.SetUp(ctx, b, &b.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if e.d.count("NodeStageVolume") != 1 || e.d.count("NodePublishVolume") != 2 {
		t.Fatalf("calls %v", e.d.callList())
	}
	if ctxKeys := e.d.lastPublish().VolumeContext; ctxKeys[ctxPodName] != "web-b" {
		t.Errorf("podInfoOnMount: volume context %v", ctxKeys)
	}
	// a goes: its publish goes, the staging stays for b.
	if err := e.pv.TearDownPod(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if e.d.count("NodeUnpublishVolume") != 1 || e.d.count("NodeUnstageVolume") != 0 {
		t.Fatalf("calls %v", e.d.callList())
	}
	if err := e.pv.TearDownPod(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if e.d.count("NodeUnpublishVolume") != 2 || e.d.count("NodeUnstageVolume") != 1 {
		t.Fatalf("calls %v", e.d.callList())
	}
	if exists(StagingDir(e.root, testDriver, "h1")) || exists(PublishDir(e.root, "b", "pv1")) {
		t.Error("records left after teardown")
	}
	// Nothing there: nothing to do.
	if err := e.pv.TearDownPod(ctx, "b"); err != nil {
		t.Fatal(err)
	}
}

func TestPodVolumesRefused(t *testing.T) {
	ctx := context.Background()
	pending := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	nfs := csiVolume("pv-nfs", "nfs", "x")
	nfs.Spec.CSI = nil
	nfs.Spec.NFS = &v1.NFSVolumeSource{Server: "s", Path: "/"}
	strange := boundClaim("web-p-scratch", "pv1") // not owned by the pod
	e := newPodEnv(t, pending, boundClaim("nfs", "pv-nfs"), nfs, strange, csiVolume("pv1", "web-p-scratch", "h1"))
	for _, tc := range []struct {
		vol v1.Volume
		err string
	}{
		{claimVolume("v", "pending"), "error processing PVC default/pending: PVC is not bound"},
		{claimVolume("v", "missing"), "error processing PVC default/missing: failed to fetch PVC from API server"},
		{claimVolume("v", "nfs"), "only CSI persistent volumes are supported by berth"},
		{v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
			"PVC default/web-p-scratch was not created for pod default/web-p (pod is not owner)"},
		{v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}},
			`volume mode "Ephemeral" not supported by driver hostpath.csi.k8s.io (no CSIDriver object)`},
	} {
		pod := testPod("p", tc.vol)
		_, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0])
		if !errIs(err, tc.err) {
			t.Errorf("%s: got %v", tc.vol.Name, err)
		}
	}
	if calls := e.d.callList(); len(calls) != 2 { // NodeGetInfo, NodeGetCapabilities
		t.Errorf("the driver was called: %v", calls)
	}
}

func TestPodVolumesWaitForAttach(t *testing.T) {
	ctx := context.Background()
	// No CSIDriver object: attach required, as in the kubelet.
	e := newPodEnv(t, boundClaim("data", "pv1"), csiVolume("pv1", "data", "h1"))
	pod := testPod("a", claimVolume("v", "data"))
	_, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0])
	var ae *AttachError
	if !errors.As(err, &ae) || ae.Attachment != AttachmentName("h1", testDriver, testNode) {
		t.Fatalf("got %v", err)
	}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: ae.Attachment}}
	if _, err := e.client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); !errors.As(err, &ae) || !strings.Contains(err.Error(), "is not attached") {
		t.Fatalf("got %v", err)
	}
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"dev": "/dev/xvdb"}}
	if _, err := e.client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	// Published, the volume's later set-ups read nothing from the API.
	reads := len(e.client.Actions())
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if n := len(e.client.Actions()); n != reads {
		t.Errorf("a set-up of a published volume read the API: %v", e.client.Actions()[reads:])
	}
	if got := e.d.lastStage().PublishContext["dev"]; got != "/dev/xvdb" {
		t.Errorf("publish context %v", e.d.lastStage().PublishContext)
	}
	if e.d.lastPublish().PublishContext["dev"] != "/dev/xvdb" {
		t.Errorf("publish context %v", e.d.lastPublish().PublishContext)
	}
}

func TestPodVolumesInline(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t, noAttach(storagev1.VolumeLifecycleEphemeral),
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default"}, Data: map[string][]byte{"k": []byte("v")}})
	pod := testPod("a", v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: testDriver, NodePublishSecretRef: &v1.LocalObjectReference{Name: "creds"}}}})
	path, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if path != PublishPath(e.root, "a", "inline") || e.d.count("NodeStageVolume") != 0 {
		t.Fatalf("path %s, calls %v", path, e.d.callList())
	}
	p := e.d.lastPublish()
	if p.VolumeId != EphemeralVolumeHandle("a", "inline") || p.StagingTargetPath != "" || p.Secrets["k"] != "v" ||
		p.VolumeContext[ctxEphemeral] != "true" {
		t.Errorf("publish %+v", p)
	}
	if err := e.pv.TearDownPod(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if e.d.count("NodeUnpublishVolume") != 1 || e.d.count("NodeUnstageVolume") != 0 {
		t.Errorf("calls %v", e.d.callList())
	}
}

func TestPodVolumesGenericEphemeral(t *testing.T) {
	ctx := context.Background()
	pod := testPod("a", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	pvc := boundClaim("web-a-scratch", "pv1")
	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	e := newPodEnv(t, pvc, csiVolume("pv1", "web-a-scratch", "h1"), noAttach())
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if e.d.count("NodeStageVolume") != 1 || e.d.count("NodePublishVolume") != 1 {
		t.Errorf("calls %v", e.d.callList())
	}
}

func TestPodVolumesFSGroup(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t, boundClaim("data", "pv1"), csiVolume("pv1", "data", "h1"), noAttach())
	pod := testPod("a", claimVolume("v", "data"))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	e.ownErr = errors.New("chown: read-only file system")
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); !errIs(err, "applying fsGroup 2000") {
		t.Fatalf("got %v", err)
	}
	// The failed ownership unpublished the volume, so the next try does
	// it all again.
	if e.d.count("NodeUnpublishVolume") != 1 {
		t.Fatalf("calls %v", e.d.callList())
	}
	e.ownErr = nil
	path, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(e.owned) != 2 || e.owned[1] != path {
		t.Errorf("ownership applied to %v", e.owned)
	}
}

func TestPodVolumesHousekeepAfterRestart(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t, boundClaim("data", "pv1"), csiVolume("pv1", "data", "h1"),
		boundClaim("logs", "pv2"), csiVolume("pv2", "logs", "h2"), noAttach())
	kept := testPod("kept", claimVolume("v", "data"))
	gone := testPod("gone", claimVolume("v", "logs"))
	for _, p := range []*v1.Pod{kept, gone} {
		if _, err := e.pv.SetUp(ctx, p, &p.Spec.Volumes[0]); err != nil {
			t.Fatal(err)
		}
	}
	// A volume staged by a setup that never published (berth killed in
	// between), for a pod that is gone.
	if _, err := e.m.Stage(ctx, StageRequest{Driver: testDriver, VolumeHandle: "h3"}); err != nil {
		t.Fatal(err)
	}

	// berth restarts: a new manager, the driver registers again.
	m := e.restart(t, 10*time.Second)
	register(t, m, e.d)
	pv := e.podVolumes(t, m)
	before := e.d.count("NodeStageVolume")
	if _, err := pv.SetUp(ctx, kept, &kept.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if e.d.count("NodeStageVolume") != before || e.d.count("NodePublishVolume") != 2 {
		t.Errorf("the mounted volume was set up again: %v", e.d.callList())
	}
	if err := pv.Housekeep(ctx, func(uid types.UID) bool { return uid == "kept" }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		call string
		n    int
	}{{"NodeUnpublishVolume", 1}, {"NodeUnstageVolume", 2}} {
		if got := e.d.count(c.call); got != c.n {
			t.Errorf("%s called %d times, want %d: %v", c.call, got, c.n, e.d.callList())
		}
	}
	if exists(PublishDir(e.root, "gone", "pv2")) || exists(StagingDir(e.root, testDriver, "h3")) || exists(StagingDir(e.root, testDriver, "h2")) {
		t.Error("the gone pod's volumes are left")
	}
	if ok, _ := e.mounts.IsMountPoint(PublishPath(e.root, "kept", "pv1")); !ok {
		t.Error("the kept pod's volume was unmounted")
	}
	if ok, _ := e.mounts.IsMountPoint(StagingPath(e.root, testDriver, "h1")); !ok {
		t.Error("the kept pod's staging was unmounted")
	}
}

func TestPodVolumesRequiresRepublish(t *testing.T) {
	ctx := context.Background()
	d := noAttach(storagev1.VolumeLifecycleEphemeral)
	d.Spec.RequiresRepublish = ptr.To(true)
	e := newPodEnv(t, d)
	pod := testPod("a", v1.Volume{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}})
	for range 3 {
		if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.d.count("NodePublishVolume"); n != 3 {
		t.Fatalf("NodePublishVolume called %d times, want each SetUp", n)
	}
	// A republish that fails leaves the volume published, its record kept.
	e.d.fail["NodePublishVolume"] = errors.New("token request failed")
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); !errIs(err, "republishing") {
		t.Fatalf("got %v", err)
	}
	if ok, _ := e.mounts.IsMountPoint(PublishPath(e.root, "a", "secrets")); !ok || !exists(PublishDir(e.root, "a", "secrets")) {
		t.Error("a failed republish unpublished the volume")
	}
}

func TestPodVolumesInUse(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t, boundClaim("data", "pv1"), csiVolume("pv1", "data", "h1"),
		noAttach(storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral))
	if got := e.pv.InUse(); got != nil {
		t.Fatalf("in use on an empty node: %v", got)
	}
	a := testPod("a", claimVolume("v", "data"), v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}})
	b := testPod("b", claimVolume("v", "data"))
	for _, p := range []*v1.Pod{a, b} {
		for i := range p.Spec.Volumes {
			if _, err := e.pv.SetUp(ctx, p, &p.Spec.Volumes[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []v1.UniqueVolumeName{"kubernetes.io/csi/hostpath.csi.k8s.io^h1"}
	if got := e.pv.InUse(); !slices.Equal(got, want) {
		t.Fatalf("in use %v, want %v", got, want)
	}
}

// A set-up that stopped before it wrote its record (berth killed) leaves a
// dir that a teardown, and the housekeeping of a pod that is gone, remove.
func TestPodVolumesLeftoverWithoutRecord(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t)
	for _, uid := range []types.UID{"a", "gone"} {
		if err := os.MkdirAll(PublishDir(e.root, uid, "pv1"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.pv.TearDownPod(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.pv.Housekeep(ctx, func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{"a", "gone"} {
		if exists(PublishDir(e.root, uid, "pv1")) {
			t.Errorf("pod %s: the leftover is still there", uid)
		}
	}
	if n := len(e.d.callList()); n != 2 { // NodeGetInfo, NodeGetCapabilities
		t.Errorf("the driver was called for leftovers: %v", e.d.callList())
	}
	// Something mounted there without a record is not berth's to remove.
	if err := os.MkdirAll(PublishPath(e.root, "b", "pv1"), 0o750); err != nil {
		t.Fatal(err)
	}
	e.mounts.set(PublishPath(e.root, "b", "pv1"), true)
	if err := e.pv.TearDownPod(ctx, "b"); !errIs(err, "cannot tell which driver") {
		t.Errorf("got %v", err)
	}
}

func TestPodVolumesServiceAccountTokens(t *testing.T) {
	ctx := context.Background()
	for _, inSecrets := range []bool{false, true} {
		d := noAttach(storagev1.VolumeLifecycleEphemeral)
		d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault"}, {Audience: ""}}
		d.Spec.ServiceAccountTokenInSecrets = ptr.To(inSecrets)
		e := newPodEnv(t, d)
		var asked []*authenticationv1.TokenRequest
		e.client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
			tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
			asked = append(asked, tr)
			out := tr.DeepCopy()
			out.Status.Token = "token-for-" + strings.Join(tr.Spec.Audiences, ",")
			return true, out, nil
		})
		pod := testPod("a", v1.Volume{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}})
		if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
			t.Fatal(err)
		}
		if len(asked) != 2 || asked[0].Spec.BoundObjectRef.UID != "a" || len(asked[1].Spec.Audiences) != 0 {
			t.Fatalf("token requests %+v", asked)
		}
		p := e.d.lastPublish()
		where, other := p.VolumeContext, p.Secrets
		if inSecrets {
			where, other = p.Secrets, p.VolumeContext
		}
		var tokens map[string]authenticationv1.TokenRequestStatus
		if err := json.Unmarshal([]byte(where[ctxServiceAccountTokens]), &tokens); err != nil {
			t.Fatalf("inSecrets %v: %v in %v", inSecrets, err, where)
		}
		if tokens["vault"].Token != "token-for-vault" || tokens[""].Token != "token-for-" {
			t.Errorf("tokens %+v", tokens)
		}
		if _, ok := other[ctxServiceAccountTokens]; ok {
			t.Errorf("inSecrets %v: the tokens are in both", inSecrets)
		}
	}
}
