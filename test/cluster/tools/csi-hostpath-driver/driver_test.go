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
