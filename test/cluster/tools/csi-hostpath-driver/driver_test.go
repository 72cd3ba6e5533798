package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`: "/a/b", `/a\040b`: "/a b", `/x\134y`: `/x\y`, `/t\011`: "/t\t", `/odd\04`: `/odd\04`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		req, limit, want int64
		code             codes.Code
	}{
		{0, 0, defaultCapacity, codes.OK},
		{5, 0, 5, codes.OK},
		{5, 10, 5, codes.OK},
		{0, 10, 10, codes.OK},
		{0, 2 * defaultCapacity, defaultCapacity, codes.OK},
		{11, 10, 0, codes.InvalidArgument},
		{-1, 0, 0, codes.InvalidArgument},
	} {
		got, err := capacity(&csi.CapacityRange{RequiredBytes: tc.req, LimitBytes: tc.limit})
		if got != tc.want || status.Code(err) != tc.code {
			t.Errorf("capacity(%d, %d) = %d, %v; want %d, %v", tc.req, tc.limit, got, err, tc.want, tc.code)
		}
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"", ".", "..", "a/b", ".hidden"} {
		if status.Code(checkID("volume_id", id)) != codes.InvalidArgument {
			t.Errorf("checkID(%q): not InvalidArgument", id)
		}
	}
	if id := volumeID("pvc-1"); checkID("volume_id", id) != nil || id != volumeID("pvc-1") || id == volumeID("pvc-2") {
		t.Errorf("volumeID(pvc-1) = %q: not a stable, distinct, valid ID", id)
	}
}

var mountCap = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

// TestNodeCycle runs the node service in this process with real bind
// mounts (it needs root, as the driver does).
func TestNodeCycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it bind-mounts")
	}
	dir := t.TempDir()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "pod", "mount")
	t.Cleanup(func() { _ = unmountAll(target); _ = unmountAll(staging) })
	st, err := openState(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{name: "hp.test", nodeID: "n1", state: st}
	ctx := context.Background()
	cv, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap}})
	if err != nil {
		t.Fatal(err)
	}
	id := cv.Volume.VolumeId
	stage := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap}
	pub := &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap, Readonly: true}
	for range 2 { // the second time, as a retrying node would
		if _, err := d.NodeStageVolume(ctx, stage); err != nil {
			t.Fatalf("NodeStageVolume: %v", err)
		}
		if _, err := d.NodePublishVolume(ctx, pub); err != nil {
			t.Fatalf("NodePublishVolume: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(staging, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(st.path(id), "f")); err != nil || string(data) != "x" {
		t.Errorf("the volume's directory has %q, %v; want what was written through the staging path", data, err)
	}
	if err := os.WriteFile(filepath.Join(target, "g"), nil, 0o644); !strings.Contains(errString(err), "read-only") {
		t.Errorf("writing to the read-only target: %v, want a read-only file system error", err)
	}
	pub.Readonly = false
	if _, err := d.NodePublishVolume(ctx, pub); status.Code(err) != codes.AlreadyExists {
		t.Errorf("publish read-write where it is read-only: %v, want AlreadyExists", err)
	}
	for range 2 {
		if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("NodeUnpublishVolume: %v", err)
		}
		if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatalf("NodeUnstageVolume: %v", err)
		}
	}
	for _, p := range []string{target, staging} {
		if m, err := mountAt(p); err != nil || m != nil {
			t.Errorf("%s: mounted (%v, %v) after the cycle", p, m, err)
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("target after unpublish: %v, want it gone", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCreateVolume(t *testing.T) {
	st, err := openState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{name: "hp.test", nodeID: "n1", state: st}
	ctx := context.Background()
	req := &csi.CreateVolumeRequest{
		Name:               "pvc-1",
		VolumeCapabilities: []*csi.VolumeCapability{mountCap},
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 5 << 20},
		Parameters:         map[string]string{"csi.storage.k8s.io/pvc/name": "c"},
	}
	first, err := d.CreateVolume(ctx, req)
	if err != nil || first.Volume.CapacityBytes != 5<<20 {
		t.Fatalf("CreateVolume = %v, %v; want 5MiB", first, err)
	}
	again, err := d.CreateVolume(ctx, req)
	if err != nil || again.Volume.VolumeId != first.Volume.VolumeId {
		t.Errorf("CreateVolume again = %v, %v; want volume %s", again, err, first.Volume.VolumeId)
	}
	bigger := &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: req.VolumeCapabilities, CapacityRange: &csi.CapacityRange{RequiredBytes: 6 << 20}}
	if _, err := d.CreateVolume(ctx, bigger); status.Code(err) != codes.AlreadyExists {
		t.Errorf("CreateVolume of the name with more bytes: %v, want AlreadyExists", err)
	}
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: mountCap.AccessMode}
	for what, bad := range map[string]*csi.CreateVolumeRequest{
		"no name":   {VolumeCapabilities: req.VolumeCapabilities},
		"block":     {Name: "b", VolumeCapabilities: []*csi.VolumeCapability{block}},
		"no caps":   {Name: "c"},
		"parameter": {Name: "p", VolumeCapabilities: req.VolumeCapabilities, Parameters: map[string]string{"type": "x"}},
	} {
		if _, err := d.CreateVolume(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("CreateVolume %s: %v, want InvalidArgument", what, err)
		}
	}
	for range 2 {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: first.Volume.VolumeId}); err != nil {
			t.Fatalf("DeleteVolume: %v", err)
		}
	}
	if _, err := os.Stat(st.path(first.Volume.VolumeId)); !os.IsNotExist(err) {
		t.Errorf("the volume's directory after DeleteVolume: %v, want it gone", err)
	}
	if _, err := d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: first.Volume.VolumeId, VolumeCapabilities: req.VolumeCapabilities}); status.Code(err) != codes.NotFound {
		t.Errorf("ValidateVolumeCapabilities of a deleted volume: %v, want NotFound", err)
	}
}

// TestEphemeral publishes an inline ephemeral volume: made by the publish,
// mounted at the target, deleted by the unpublish.
func TestEphemeral(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it bind-mounts")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "pod", "mount")
	t.Cleanup(func() { _ = unmountAll(target) })
	st, err := openState(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{name: "hp.test", nodeID: "n1", state: st}
	ctx := context.Background()
	const id = "csi-0123abcd"
	pub := &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: mountCap, VolumeContext: map[string]string{ephemeralKey: "true"}}
	for range 2 {
		if _, err := d.NodePublishVolume(ctx, pub); err != nil {
			t.Fatalf("NodePublishVolume: %v", err)
		}
	}
	if same, err := sameFile(target, st.path(id)); err != nil || !same {
		t.Errorf("target is the ephemeral volume's directory: %v, %v", same, err)
	}
	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if _, err := os.Stat(st.path(id)); !os.IsNotExist(err) {
		t.Errorf("the ephemeral volume after unpublish: %v, want it gone", err)
	}
	if m, err := mountAt(target); err != nil || m != nil {
		t.Errorf("%s: mounted (%v, %v) after unpublish", target, m, err)
	}
}
