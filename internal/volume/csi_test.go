package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeCSI is the CSI side of the volume manager: it "publishes" a volume by
// making its dir and record, as csi.PodVolumes leaves them on disk.
type fakeCSI struct {
	root     string
	setUpErr error
	tearErr  error
	setUps   []string
	tornDown []types.UID
}

func (f *fakeCSI) dir(uid types.UID, name string) string {
	return filepath.Join(f.root, "pods", string(uid), "volumes", csiPluginDir, name)
}

func (f *fakeCSI) SetUp(_ context.Context, pod *v1.Pod, vol *v1.Volume) (string, error) {
	f.setUps = append(f.setUps, vol.Name)
	if f.setUpErr != nil {
		return "", f.setUpErr
	}
	d := f.dir(pod.UID, vol.Name)
	if err := os.MkdirAll(filepath.Join(d, "mount"), 0o750); err != nil {
		return "", err
	}
	return filepath.Join(d, "mount"), os.WriteFile(filepath.Join(d, "vol_data.json"), []byte("{}"), 0o600)
}

func (f *fakeCSI) TearDownPod(_ context.Context, uid types.UID) error {
	f.tornDown = append(f.tornDown, uid)
	if f.tearErr != nil {
		return f.tearErr
	}
	return os.RemoveAll(filepath.Join(f.root, "pods", string(uid), "volumes", csiPluginDir))
}

func claimVol(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}
}

func TestCSIVolumesNeedTheAPIServer(t *testing.T) {
	m, _ := newTestManager(t)
	for _, vol := range []v1.Volume{
		claimVol("data"),
		{Name: "e", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
		{Name: "i", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}},
	} {
		_, err := m.Setup(context.Background(), testPod("uid-1", vol), SetupOptions{})
		if err == nil || !strings.Contains(err.Error(), "need an API server") {
			t.Errorf("%s: got %v", vol.Name, err)
		}
	}
}

func TestCSIVolumesSetUpAndTearDown(t *testing.T) {
	m, root := newTestManager(t)
	f := &fakeCSI{root: root}
	m.SetCSI(f)
	pod := testPod("uid-1", claimVol("data"), emptyDirVolume("scratch", "", ""))
	paths, err := m.Setup(context.Background(), pod, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(f.dir("uid-1", "data"), "mount"); paths["data"] != want || paths["scratch"] == "" {
		t.Errorf("paths %v", paths)
	}

	// A teardown that fails keeps the pod's directory, records included.
	f.tearErr = errors.New("driver not registered")
	if err := m.TearDown(context.Background(), pod.UID); err == nil || !strings.Contains(err.Error(), "driver not registered") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(f.dir("uid-1", "data")); err != nil {
		t.Fatalf("the CSI record went with a failed teardown: %v", err)
	}
	// Housekeeping leaves a pod with CSI volumes to the CSI housekeeping.
	removed, err := m.Housekeep(func(types.UID) bool { return false })
	if err != nil || len(removed) != 0 {
		t.Fatalf("housekeeping removed %v, %v", removed, err)
	}
	f.tearErr = nil
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory: %v", err)
	}
	if len(f.tornDown) != 2 {
		t.Errorf("TearDownPod calls %v", f.tornDown)
	}
}

func TestCSIVolumesWithoutCSIAreNotRemoved(t *testing.T) {
	m, root := newTestManager(t)
	f := &fakeCSI{root: root}
	m.SetCSI(f)
	pod := testPod("uid-1", claimVol("data"))
	if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same root on a node with no CSI (standalone): the records stay.
	m2 := NewManager(root, NewMounter(), discardLogger())
	if err := m2.TearDown(context.Background(), pod.UID); err == nil || !strings.Contains(err.Error(), "CSI volumes") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(f.dir("uid-1", "data")); err != nil {
		t.Fatal(err)
	}
}
