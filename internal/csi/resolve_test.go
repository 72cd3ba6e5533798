package csi

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestClaimOf(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}
	for _, tc := range []struct {
		vol                     v1.Volume
		claim                   string
		eph, ro, ok, handledSrc bool
	}{
		{v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c", ReadOnly: true}}},
			"c", false, true, true, true},
		{v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
			"web-0-scratch", true, false, true, true},
		{v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}},
			"", false, false, false, true},
		{v1.Volume{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			"", false, false, false, false},
	} {
		claim, eph, ro, ok := ClaimOf(pod, &tc.vol)
		if claim != tc.claim || eph != tc.eph || ro != tc.ro || ok != tc.ok || Handled(&tc.vol) != tc.handledSrc {
			t.Errorf("%s: got %q %v %v %v %v", tc.vol.Name, claim, eph, ro, ok, Handled(&tc.vol))
		}
	}
}

func TestCheckClaim(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pvc  v1.PersistentVolumeClaim
		pv   string
		err  string
	}{
		{"bound", v1.PersistentVolumeClaim{Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}, "pv1", ""},
		{"pending", v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}, "", "PVC is not bound"},
		{"no volume name", v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}, "", "empty pvc.Spec.VolumeName"},
		{"deleted, protected", v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"kubernetes.io/pvc-protection"}},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}, "pv1", ""},
		{"deleted", v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}, "", "PVC is being deleted"},
	} {
		pv, err := CheckClaim(&tc.pvc)
		if pv != tc.pv || !errIs(err, tc.err) {
			t.Errorf("%s: got %q, %v", tc.name, pv, err)
		}
	}
}

func errIs(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}

func TestCheckEphemeralOwner(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	owned := func(uid string, controller bool) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "p-v", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "p", UID: "u1", Controller: &controller}}}}
	}
	if err := CheckEphemeralOwner(pod, owned("u1", true)); err != nil {
		t.Error(err)
	}
	for _, pvc := range []*v1.PersistentVolumeClaim{owned("u1", false), {ObjectMeta: metav1.ObjectMeta{Name: "p-v", Namespace: "ns"}}} {
		err := CheckEphemeralOwner(pod, pvc)
		if !errIs(err, "PVC ns/p-v was not created for pod ns/p (pod is not owner)") {
			t.Errorf("got %v", err)
		}
	}
	other := owned("u1", true)
	other.OwnerReferences[0].UID = "u2"
	if err := CheckEphemeralOwner(pod, other); err == nil {
		t.Error("a PVC of another pod UID passed")
	}
}

func TestFromPV(t *testing.T) {
	csiPV := func() *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: v1.PersistentVolumeSpec{
			ClaimRef:     &v1.ObjectReference{UID: "c1"},
			AccessModes:  []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			MountOptions: []string{"noatime"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: "hostpath.csi.k8s.io", VolumeHandle: "h1", FSType: "ext4",
				VolumeAttributes:     map[string]string{"a": "b"},
				NodeStageSecretRef:   &v1.SecretReference{Name: "s", Namespace: "x"},
				NodePublishSecretRef: &v1.SecretReference{Name: "p", Namespace: "y"},
			}},
		}}
	}
	got, err := FromPV(csiPV(), "c1", true)
	want := Source{Driver: "hostpath.csi.k8s.io", VolumeHandle: "h1", VolumeName: "pv1", ReadOnly: true, FSType: "ext4",
		MountOptions: []string{"noatime"}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		VolumeAttributes: map[string]string{"a": "b"},
		StageSecret:      &v1.SecretReference{Name: "s", Namespace: "x"}, PublishSecret: &v1.SecretReference{Name: "p", Namespace: "y"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v", got, err)
	}
	roPV := csiPV()
	roPV.Spec.CSI.ReadOnly = true
	if got, _ := FromPV(roPV, "c1", false); !got.ReadOnly {
		t.Error("the CSI source's readOnly was lost")
	}
	for _, tc := range []struct {
		name   string
		change func(*v1.PersistentVolume)
		err    string
	}{
		{"unbound", func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef = nil }, "nil pv.Spec.ClaimRef"},
		{"other claim", func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef.UID = "c2" }, "does not point to claim.UID c1"},
		{"nfs", func(pv *v1.PersistentVolume) {
			pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{}}
		}, "only CSI persistent volumes"},
		{"block", func(pv *v1.PersistentVolume) { pv.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock) }, "volumeMode Block"},
		{"no handle", func(pv *v1.PersistentVolume) { pv.Spec.CSI.VolumeHandle = "" }, "needs a driver and a volumeHandle"},
	} {
		pv := csiPV()
		tc.change(pv)
		if _, err := FromPV(pv, "c1", false); !errIs(err, tc.err) {
			t.Errorf("%s: got %v", tc.name, err)
		}
	}
}

func TestFromInline(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	vol := &v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: "d", ReadOnly: ptr.To(true), FSType: ptr.To("xfs"), VolumeAttributes: map[string]string{"k": "v"},
		NodePublishSecretRef: &v1.LocalObjectReference{Name: "sec"},
	}}}
	got, err := FromInline(pod, vol)
	want := Source{Driver: "d", VolumeHandle: EphemeralVolumeHandle("u1", "v"), VolumeName: "v", Ephemeral: true, ReadOnly: true,
		FSType: "xfs", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, VolumeAttributes: map[string]string{"k": "v"},
		PublishSecret: &v1.SecretReference{Name: "sec", Namespace: "ns"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := FromInline(pod, &v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{}}}); err == nil {
		t.Error("an inline volume without a driver passed")
	}
}

func TestPolicy(t *testing.T) {
	none := PolicyOf(nil)
	if !none.AttachRequired || none.PodInfoOnMount || none.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy {
		t.Errorf("no CSIDriver: %+v", none)
	}
	d := &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true), FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy),
		RequiresRepublish: ptr.To(true), SELinuxMount: ptr.To(true),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
	}}
	p := PolicyOf(d)
	if p.AttachRequired || !p.PodInfoOnMount || p.FSGroupPolicy != storagev1.FileFSGroupPolicy || !p.RequiresRepublish || !p.SELinuxMount || !p.Found {
		t.Errorf("CSIDriver: %+v", p)
	}
	defaults := PolicyOf(&storagev1.CSIDriver{})
	if !defaults.AttachRequired || !reflect.DeepEqual(defaults.Modes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("empty CSIDriver: %+v", defaults)
	}
	for _, tc := range []struct {
		name      string
		p         Policy
		ephemeral bool
		err       string
	}{
		{"no object, persistent", none, false, ""},
		{"no object, inline", none, true, `volume mode "Ephemeral" not supported by driver d (no CSIDriver object)`},
		{"ephemeral only, inline", p, true, ""},
		{"ephemeral only, persistent", p, false, `volume mode "Persistent" not supported by driver d (only supports ["Ephemeral"])`},
		{"defaults, inline", defaults, true, `not supported by driver d (only supports ["Persistent"])`},
	} {
		if err := tc.p.CheckMode("d", tc.ephemeral); !errIs(err, tc.err) {
			t.Errorf("%s: got %v", tc.name, err)
		}
	}
	if none.NeedsAttach(Source{Ephemeral: true}) || !none.NeedsAttach(Source{}) || p.NeedsAttach(Source{}) {
		t.Error("NeedsAttach")
	}
}

func TestCheckAttachment(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		va   storagev1.VolumeAttachment
		ok   bool
		err  string
	}{
		{"attached", storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: true}}, true, ""},
		{"not yet", storagev1.VolumeAttachment{}, false, ""},
		{"error", storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "no such disk"}}}, false, "no such disk"},
		{"deleted", storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: storagev1.VolumeAttachmentStatus{Attached: true}},
			false, "being deleted"},
	} {
		ok, err := CheckAttachment(&tc.va)
		if ok != tc.ok || !errIs(err, tc.err) {
			t.Errorf("%s: got %v, %v", tc.name, ok, err)
		}
	}
}
