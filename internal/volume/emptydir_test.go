package volume

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// statT is the raw stat of p: group and the full mode bits, setgid and
// sticky included.
func statT(t *testing.T, p string) (gid, mode uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Gid, st.Mode & 0o7777
}

func withFSGroup(pod *v1.Pod, gid int64) *v1.Pod {
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To(gid)}
	return pod
}

// TestEmptyDirFSGroup checks the kubelet's emptyDir SetUpAt ownership: the
// new volume's root belongs to the fsGroup with setgid and group rwx, on
// disk and on a tmpfs (whose root starts 1777), and nothing changes without
// an fsGroup.
func TestEmptyDirFSGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		medium   v1.StorageMedium
		fsGroup  int64 // 0: none
		wantGID  uint32
		wantMode uint32
	}{
		{"disk with fsGroup", v1.StorageMediumDefault, 1234, 1234, 0o2777},
		{"memory with fsGroup", v1.StorageMediumMemory, 1234, 1234, 0o3777},
		{"disk without fsGroup", v1.StorageMediumDefault, 0, 0, 0o777},
		{"memory without fsGroup", v1.StorageMediumMemory, 0, 0, 0o1777},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestManager(t)
			pod := testPod("uid-fsg", emptyDirVolume("scratch", tc.medium, ""))
			if tc.fsGroup != 0 {
				withFSGroup(pod, tc.fsGroup)
			}
			paths, err := m.Setup(context.Background(), pod, SetupOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if gid, mode := statT(t, paths["scratch"]); gid != tc.wantGID || mode != tc.wantMode {
				t.Errorf("volume root: gid %d mode %#o, want %d %#o", gid, mode, tc.wantGID, tc.wantMode)
			}
		})
	}
}

// TestEmptyDirOwnershipOnce checks that ownership is given when the volume
// is set up, not at every container start: what the pod wrote since keeps
// its group and mode, as with the kubelet's ready marker.
func TestEmptyDirOwnershipOnce(t *testing.T) {
	m, _ := newTestManager(t)
	pod := withFSGroup(testPod("uid-once", emptyDirVolume("scratch", "", "")), 1234)
	ctx := context.Background()
	paths, err := m.Setup(ctx, pod, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(paths["scratch"], "own")
	if err := os.WriteFile(own, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, -1, 77); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(ctx, pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	if gid, mode := statT(t, own); gid != 77 || mode != 0o600 {
		t.Errorf("a file the pod wrote: gid %d mode %#o after a second setup, want 77 0600", gid, mode)
	}
	if gid, mode := statT(t, paths["scratch"]); gid != 1234 || mode != 0o2777 {
		t.Errorf("volume root: gid %d mode %#o, want 1234 02777", gid, mode)
	}
}

// TestEmptyDirOwnershipRedone checks the cases where the kubelet sets the
// volume up again: no ready marker (a volume berth made before it kept
// one), and a Memory volume whose tmpfs is gone.
func TestEmptyDirOwnershipRedone(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := context.Background()
	pod := withFSGroup(testPod("uid-redo", emptyDirVolume("disk", "", ""), emptyDirVolume("mem", v1.StorageMediumMemory, "")), 1234)

	// A disk volume with content and no marker: everything is given to
	// the group, read-write.
	dir := filepath.Join(m.emptyDirRoot(pod.UID), "disk")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "sub", "old")
	if err := os.WriteFile(old, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	paths, err := m.Setup(ctx, pod, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]uint32{old: 0o660, filepath.Join(dir, "sub"): 0o2770, dir: 0o2777} {
		if gid, mode := statT(t, p); gid != 1234 || mode != want {
			t.Errorf("%s: gid %d mode %#o, want 1234 %#o", p, gid, mode, want)
		}
	}
	if !m.emptyDirReady(pod.UID, "disk") || !m.emptyDirReady(pod.UID, "mem") {
		t.Error("volumes not marked ready")
	}

	// The tmpfs is gone (the node rebooted under the pod): a new one is
	// mounted and given to the group again.
	if err := unix.Unmount(paths["mem"], 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(paths["mem"], -1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(ctx, pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	if gid, mode := statT(t, paths["mem"]); gid != 1234 || mode != 0o3777 {
		t.Errorf("remounted tmpfs: gid %d mode %#o, want 1234 03777", gid, mode)
	}
}

// TestSetVolumeOwnershipMasks checks the kubelet's changeFilePermission
// masks: rw (0660) or r (0440) for the group on files, plus x (0110) and
// setgid on directories; symlinks change group but never mode.
func TestSetVolumeOwnershipMasks(t *testing.T) {
	for _, tc := range []struct {
		readOnly          bool
		wantFile, wantDir uint32
	}{
		{false, 0o660, 0o2770},
		{true, 0o640, 0o2750},
	} {
		root := t.TempDir()
		sub := filepath.Join(root, "d")
		file := filepath.Join(sub, "f")
		target := filepath.Join(root, "target")
		link := filepath.Join(sub, "l")
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{file, target} {
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(f, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := setVolumeOwnership(sub, 2000, tc.readOnly); err != nil {
			t.Fatal(err)
		}
		if gid, mode := statT(t, file); gid != 2000 || mode != tc.wantFile {
			t.Errorf("readOnly %v: file gid %d mode %#o, want 2000 %#o", tc.readOnly, gid, mode, tc.wantFile)
		}
		if gid, mode := statT(t, sub); gid != 2000 || mode != tc.wantDir {
			t.Errorf("readOnly %v: dir gid %d mode %#o, want 2000 %#o", tc.readOnly, gid, mode, tc.wantDir)
		}
		if gid, _ := statT(t, link); gid != 2000 {
			t.Errorf("readOnly %v: symlink gid %d, want 2000", tc.readOnly, gid)
		}
		if gid, mode := statT(t, target); gid != 0 || mode != 0o600 {
			t.Errorf("readOnly %v: symlink target changed: gid %d mode %#o", tc.readOnly, gid, mode)
		}
	}
}
