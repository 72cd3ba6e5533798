package volume

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestManager returns a real Manager on a fresh root, and makes sure no
// mount the test leaves behind outlives it.
func newTestManager(t *testing.T) (*Manager, string) {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() { unmountAllUnder(t, root) })
	return NewManager(root, NewMounter(), discardLogger()), root
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(t *testing.T, dir string) []*mountinfo.Info {
	t.Helper()
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	return mounts
}

func unmountAllUnder(t *testing.T, dir string) {
	for _, mi := range mountsUnder(t, dir) {
		if err := unix.Unmount(mi.Mountpoint, unix.MNT_DETACH); err != nil {
			t.Errorf("cleanup: unmounting %s: %v", mi.Mountpoint, err)
		}
	}
}

func testPod(uid string, volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Volumes: volumes},
	}
}

func emptyDirVolume(name string, medium v1.StorageMedium, size string) v1.Volume {
	src := &v1.EmptyDirVolumeSource{Medium: medium}
	if size != "" {
		q := resource.MustParse(size)
		src.SizeLimit = &q
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: src}}
}

func hostPathVolume(name, path string, t v1.HostPathType) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &t}}}
}

func TestPaths(t *testing.T) {
	m := NewManager("/var/lib/berth", NewMounter(), discardLogger())
	if got := m.PodDir("u1"); got != "/var/lib/berth/pods/u1" {
		t.Errorf("PodDir = %q", got)
	}
	if got := m.ContainerDir("u1", "app"); got != "/var/lib/berth/pods/u1/containers/app" {
		t.Errorf("ContainerDir = %q", got)
	}
}

func TestSetupEmptyDir(t *testing.T) {
	m, root := newTestManager(t)
	pod := testPod("uid-1", emptyDirVolume("cache", "", ""))
	for i := 0; i < 2; i++ { // idempotent
		paths, err := m.Setup(context.Background(), pod, SetupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(root, "pods/uid-1/volumes/kubernetes.io~empty-dir/cache")
		if paths["cache"] != want || len(paths) != 1 {
			t.Fatalf("paths = %v, want cache=%s", paths, want)
		}
		fi, err := os.Stat(want)
		if err != nil {
			t.Fatal(err)
		}
		// 0777 regardless of the process umask.
		if !fi.IsDir() || fi.Mode().Perm() != 0o777 {
			t.Errorf("mode = %v, want a 0777 directory", fi.Mode())
		}
	}
	// Content survives a repeated Setup.
	f := filepath.Join(root, "pods/uid-1/volumes/kubernetes.io~empty-dir/cache/keep")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f); err != nil {
		t.Errorf("file lost on re-Setup: %v", err)
	}
	if got := mountsUnder(t, root); len(got) != 0 {
		t.Errorf("a disk-backed emptyDir mounted something: %v", got[0].Mountpoint)
	}
}

func TestSetupTmpfsAndTearDown(t *testing.T) {
	m, root := newTestManager(t)
	pod := testPod("uid-mem",
		emptyDirVolume("sized", v1.StorageMediumMemory, "64Mi"),
		emptyDirVolume("unsized", v1.StorageMediumMemory, ""),
		emptyDirVolume("disk", "", ""),
	)
	var paths map[string]string
	for i := 0; i < 2; i++ { // idempotent: no second mount on top of the first
		var err error
		if paths, err = m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mounts := mountsUnder(t, root)
	if len(mounts) != 2 {
		t.Fatalf("got %d mounts under the root, want 2 (one per Memory volume)", len(mounts))
	}
	byPath := map[string]*mountinfo.Info{}
	for _, mi := range mounts {
		byPath[mi.Mountpoint] = mi
	}
	sized := byPath[paths["sized"]]
	if sized == nil || sized.FSType != "tmpfs" || !strings.Contains(sized.VFSOptions, "size=65536k") {
		t.Errorf("sized volume mount = %+v, want tmpfs with size=65536k", sized)
	}
	if mi := byPath[paths["unsized"]]; mi == nil || mi.FSType != "tmpfs" {
		t.Errorf("unsized volume mount = %+v, want tmpfs", mi)
	}
	// The volume is usable.
	if err := os.WriteFile(filepath.Join(paths["sized"], "data"), []byte("in memory"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := mountsUnder(t, root); len(got) != 0 {
		t.Errorf("TearDown left %d mounts, first %s", len(got), got[0].Mountpoint)
	}
	if _, err := os.Lstat(m.PodDir(pod.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod directory still there: %v", err)
	}
	// A second TearDown has nothing to do.
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Errorf("repeated TearDown: %v", err)
	}
}

func TestTearDownLeavesHostPathAlone(t *testing.T) {
	m, _ := newTestManager(t)
	hostDir := t.TempDir()
	keep := filepath.Join(hostDir, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := testPod("uid-hp", hostPathVolume("host", hostDir, v1.HostPathDirectory), emptyDirVolume("scratch", "", ""))
	if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(m.ContainerDir(pod.UID, "app"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("hostPath content gone: %v", err)
	}
}

func TestTearDownRefusesToDeleteThroughAMount(t *testing.T) {
	m, root := newTestManager(t)
	pod := testPod("uid-stray", emptyDirVolume("scratch", "", ""))
	if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	// Something else mounted a filesystem inside the pod directory.
	stray := filepath.Join(m.ContainerDir(pod.UID, "app"), "mnt")
	if err := os.MkdirAll(stray, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", stray, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	survivor := filepath.Join(stray, "not-the-pods")
	if err := os.WriteFile(survivor, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := m.TearDown(context.Background(), pod.UID)
	if err == nil || !strings.Contains(err.Error(), stray+" is still a mount point") {
		t.Fatalf("TearDown err = %v, want a refusal naming %s", err, stray)
	}
	if _, err := os.Stat(survivor); err != nil {
		t.Errorf("TearDown deleted through a mount: %v", err)
	}
	unmountAllUnder(t, root)
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Errorf("TearDown after the stray mount is gone: %v", err)
	}
}

func TestSetupRejects(t *testing.T) {
	m, _ := newTestManager(t)
	tests := []struct {
		name    string
		pod     *v1.Pod
		wantErr string
	}{
		{"configMap without an API server", testPod("u", v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}),
			`volume "cfg": configMap volumes need an API server`},
		{"nfs", testPod("u", v1.Volume{Name: "share", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{}}}),
			`volume "share": volume source nfs is not supported`},
		{"no source", testPod("u", v1.Volume{Name: "nothing"}), `volume "nothing": volume source (none) is not supported`},
		{"huge pages without a request", testPod("u", emptyDirVolume("hp", v1.StorageMediumHugePages, "")),
			`volume "hp": emptyDir: medium HugePages: hugePages storage requested, but there is no resource request for huge pages`},
		{"bad uid", testPod("../x", emptyDirVolume("v", "", "")), `metadata.uid "../x" cannot be used as a directory name`},
		{"empty uid", testPod("", emptyDirVolume("v", "", "")), `metadata.uid "" cannot be used`},
		{"bad volume name", testPod("u", emptyDirVolume("..", "", "")), `name ".." cannot be used`},
		{"relative hostPath", testPod("u", hostPathVolume("rel", "srv/data", v1.HostPathUnset)), `volume "rel": hostPath "srv/data" must be an absolute path`},
		{"hostPath with ..", testPod("u", hostPathVolume("up", "/srv/../etc", v1.HostPathUnset)), `must not contain '..'`},
		{"bad hostPath type", testPod("u", hostPathVolume("odd", "/", "Folder")), `hostPath type "Folder" is not a valid type`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Setup(context.Background(), tt.pod, SetupOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	if err := m.TearDown(context.Background(), "../.."); err == nil {
		t.Error("TearDown accepted a UID that escapes the pods directory")
	}
}

// fakeMounter records what the manager asks for, for the logic that does not
// need a real mount.
type fakeMounter struct {
	mounted map[string]int64
	calls   []string
}

func (f *fakeMounter) MountTmpfs(target string, size int64) error {
	f.calls = append(f.calls, "mount "+target)
	f.mounted[target] = size
	return nil
}

func (f *fakeMounter) MountHugetlbfs(target, pageSize string) error {
	f.calls = append(f.calls, "mount hugetlbfs pagesize="+pageSize+" "+target)
	f.mounted[target] = 0
	return nil
}

func (f *fakeMounter) Unmount(target string) error {
	f.calls = append(f.calls, "unmount "+target)
	delete(f.mounted, target)
	return nil
}

func (f *fakeMounter) IsMountPoint(path string) (bool, error) {
	_, ok := f.mounted[path]
	return ok, nil
}

func TestTmpfsSizeAndUnmountWithFakeMounter(t *testing.T) {
	fm := &fakeMounter{mounted: map[string]int64{}}
	m := NewManager(t.TempDir(), fm, discardLogger())
	pod := testPod("u", emptyDirVolume("a", v1.StorageMediumMemory, "1Gi"), emptyDirVolume("b", v1.StorageMediumMemory, ""))
	paths, err := m.Setup(context.Background(), pod, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	if fm.mounted[paths["a"]] != 1<<30 || fm.mounted[paths["b"]] != 0 || len(fm.calls) != 2 {
		t.Errorf("mounted = %v, calls = %v", fm.mounted, fm.calls)
	}
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if len(fm.mounted) != 0 {
		t.Errorf("still mounted: %v", fm.mounted)
	}
}

// hostPathFixtures creates one of each kind of file in a fresh directory.
func hostPathFixtures(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	// A block device node of our own, so the test touches no real disk.
	if err := unix.Mknod(filepath.Join(dir, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "dir"), filepath.Join(dir, "link-to-dir")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestHostPathTypes(t *testing.T) {
	dir := hostPathFixtures(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		path    string
		typ     v1.HostPathType
		wantErr string // "" for success; the message after `volume "v": `
	}{
		{p("anything-missing"), v1.HostPathUnset, ""},
		{p("dir"), v1.HostPathDirectory, ""},
		{p("link-to-dir"), v1.HostPathDirectory, ""},
		{p("file"), v1.HostPathDirectory, "hostPath type check failed: " + p("file") + " is not a directory"},
		{p("missing"), v1.HostPathDirectory, "hostPath type check failed: " + p("missing") + " is not a directory"},
		{p("dir"), v1.HostPathDirectoryOrCreate, ""},
		{p("file"), v1.HostPathDirectoryOrCreate, "hostPath type check failed: " + p("file") + " is not a directory"},
		{p("file"), v1.HostPathFile, ""},
		{p("sock"), v1.HostPathFile, ""},   // the kubelet's notion of a file: exists, not a directory
		{"/dev/null", v1.HostPathFile, ""}, // likewise
		{p("dir"), v1.HostPathFile, "hostPath type check failed: " + p("dir") + " is not a file"},
		{p("missing"), v1.HostPathFile, "hostPath type check failed: " + p("missing") + " is not a file"},
		{p("file"), v1.HostPathFileOrCreate, ""},
		{p("dir"), v1.HostPathFileOrCreate, "hostPath type check failed: " + p("dir") + " is not a file"},
		{p("sock"), v1.HostPathSocket, ""},
		{p("file"), v1.HostPathSocket, "hostPath type check failed: " + p("file") + " is not a socket file"},
		{p("missing"), v1.HostPathSocket, "hostPath type check failed: " + p("missing") + " is not a socket file"},
		{"/dev/null", v1.HostPathCharDev, ""},
		{p("blk"), v1.HostPathCharDev, "hostPath type check failed: " + p("blk") + " is not a character device"},
		{p("file"), v1.HostPathCharDev, "hostPath type check failed: " + p("file") + " is not a character device"},
		{p("blk"), v1.HostPathBlockDev, ""},
		{"/dev/null", v1.HostPathBlockDev, "hostPath type check failed: /dev/null is not a block device"},
		{p("dir"), v1.HostPathBlockDev, "hostPath type check failed: " + p("dir") + " is not a block device"},
	}
	m, _ := newTestManager(t)
	for _, tt := range tests {
		t.Run(string(tt.typ)+" "+filepath.Base(tt.path), func(t *testing.T) {
			paths, err := m.Setup(context.Background(), testPod("uid-hp", hostPathVolume("v", tt.path, tt.typ)), SetupOptions{})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if paths["v"] != tt.path {
					t.Errorf("path = %q, want %q", paths["v"], tt.path)
				}
				return
			}
			if want := `volume "v": ` + tt.wantErr; err == nil || err.Error() != want {
				t.Fatalf("err = %v\nwant %s", err, want)
			}
		})
	}
}

func TestHostPathCreateTypes(t *testing.T) {
	m, _ := newTestManager(t)
	dir := t.TempDir()
	newDir := filepath.Join(dir, "a", "b", "c")
	newFile := filepath.Join(dir, "new-file")
	orphan := filepath.Join(dir, "no-parent", "file")
	pod := testPod("uid-create",
		hostPathVolume("d", newDir, v1.HostPathDirectoryOrCreate),
		hostPathVolume("f", newFile, v1.HostPathFileOrCreate),
	)
	for i := 0; i < 2; i++ { // idempotent
		if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(newDir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&^0o755 != 0 || fi.Mode().Perm()&0o700 != 0o700 {
		t.Errorf("DirectoryOrCreate: %v, %v (want a 0755 directory, less the umask)", fi, err)
	}
	fi, err = os.Stat(newFile)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.Mode().Perm()&^0o644 != 0 {
		t.Errorf("FileOrCreate: %v, %v (want an empty 0644 file)", fi, err)
	}
	// FileOrCreate does not create the parent directory, as in the kubelet.
	_, err = m.Setup(context.Background(), testPod("uid-create", hostPathVolume("o", orphan, v1.HostPathFileOrCreate)), SetupOptions{})
	if err == nil || !strings.Contains(err.Error(), `volume "o": hostPath type check failed: creating file:`) {
		t.Errorf("err = %v", err)
	}
}

// Housekeep removes the directories of pods wanted says are gone, tmpfs
// volumes unmounted first, and leaves the others and anything that is not a
// pod directory alone.
func TestHousekeepRemovesOrphanedPodDirs(t *testing.T) {
	m, root := newTestManager(t)
	kept := testPod("uid-kept", emptyDirVolume("scratch", "", ""))
	orphan := testPod("uid-orphan", emptyDirVolume("scratch", "", ""), emptyDirVolume("mem", v1.StorageMediumMemory, ""))
	for _, p := range []*v1.Pod{kept, orphan} {
		if _, err := m.Setup(context.Background(), p, SetupOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stray := filepath.Join(root, "pods", "not-a-dir")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := m.Housekeep(func(uid types.UID) bool { return uid == kept.UID })
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != orphan.UID {
		t.Errorf("removed %v, want [%s]", removed, orphan.UID)
	}
	if _, err := os.Stat(m.PodDir(orphan.UID)); !os.IsNotExist(err) {
		t.Errorf("the orphan's directory: %v", err)
	}
	if _, err := os.Stat(m.PodDir(kept.UID)); err != nil {
		t.Errorf("the wanted pod's directory: %v", err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("a file that is no pod directory: %v", err)
	}
	if got := mountsUnder(t, root); len(got) != 0 {
		t.Errorf("mounts left: %d", len(got))
	}
	// No pods directory at all is nothing to do.
	empty := NewManager(t.TempDir(), NewMounter(), discardLogger())
	if removed, err := empty.Housekeep(func(types.UID) bool { return false }); err != nil || len(removed) != 0 {
		t.Errorf("no pods dir: %v, %v", removed, err)
	}
}

// An image volume is the runtime's to mount: Setup makes nothing on the host
// and gives it no host path, next to the volumes it does make.
func TestSetupImageVolume(t *testing.T) {
	m, root := newTestManager(t)
	pod := testPod("uid-img", emptyDirVolume("cache", "", ""),
		v1.Volume{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1"}}})
	paths, err := m.Setup(context.Background(), pod, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := paths["tools"]; !ok || p != "" || paths["cache"] == "" {
		t.Errorf("paths = %v, want tools with no host path beside cache", paths)
	}
	if _, err := os.Stat(filepath.Join(root, "pods/uid-img/volumes")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "pods/uid-img/volumes"))
	if len(entries) != 1 {
		t.Errorf("volume plugin dirs = %v, want only the emptyDir's", entries)
	}
}
