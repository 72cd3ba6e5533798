package containerd

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	ocilayout "github.com/google/go-containerregistry/pkg/v1/layout"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

func TestStartServesCRIAndStops(t *testing.T) {
	root := testRoot(t)
	m := startManaged(t, root)
	if !m.StartedByUs() || m.Pid() == 0 {
		t.Fatalf("StartedByUs=%v Pid=%d, want a child of ours", m.StartedByUs(), m.Pid())
	}
	if m.Address() != filepath.Join(root, "containerd", "containerd.sock") || m.Endpoint() != "unix://"+m.Address() {
		t.Errorf("Address %q Endpoint %q", m.Address(), m.Endpoint())
	}
	if m.Snapshotter() != SnapshotterOverlay && m.Snapshotter() != SnapshotterNative {
		t.Errorf("Snapshotter = %q", m.Snapshotter())
	}

	rs, _ := criClients(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatalf("CRI Version: %v", err)
	}
	if v.RuntimeName != "containerd" || v.RuntimeApiVersion != "v1" {
		t.Errorf("CRI Version = %+v", v)
	}
	if sid, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(m.Pid()), "stat")); err == nil {
		// Field 6 of stat is the session ID: containerd leads its own.
		fields := strings.Fields(string(sid)[strings.LastIndexByte(string(sid), ')')+2:])
		if fields[3] != strconv.Itoa(m.Pid()) {
			t.Errorf("containerd's session is %s, want its own (%d)", fields[3], m.Pid())
		}
	}

	stopManaged(t, m)
	select {
	case <-m.Done():
	default:
		t.Error("containerd still running after Stop")
	}
	if _, err := os.Stat(filepath.Join(root, "containerd", "containerd.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after Stop: %v", err)
	}
}

// Two berths on one host (the e2e tests run their own) must not share a
// path: each containerd serves its own root.
func TestTwoManagedContainerdsCoexist(t *testing.T) {
	a := startManaged(t, testRoot(t))
	b := startManaged(t, testRoot(t))
	if a.Pid() == b.Pid() || !a.StartedByUs() || !b.StartedByUs() {
		t.Fatalf("pids %d and %d, started by us %v %v", a.Pid(), b.Pid(), a.StartedByUs(), b.StartedByUs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []*Managed{a, b} {
		rs, _ := criClients(t, m)
		if _, err := rs.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
			t.Errorf("CRI Version on %s: %v", m.Address(), err)
		}
	}
}

func TestStartAdoptsRunningContainerd(t *testing.T) {
	root := testRoot(t)
	first := startManaged(t, root)

	// A second Start on the same root is what a berth restarted after a
	// crash does: it must find the running containerd, not start another.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	second, err := Start(ctx, Options{RootDir: root, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if second.StartedByUs() {
		t.Fatal("second Start started a containerd instead of adopting one")
	}
	if second.Pid() != first.Pid() || second.Snapshotter() != first.Snapshotter() {
		t.Errorf("adopted pid %d snapshotter %q, want %d %q", second.Pid(), second.Snapshotter(), first.Pid(), first.Snapshotter())
	}
	record := filepath.Join(root, "containerd", RecordName)
	rec, ok, err := ReadRecord(filepath.Dir(record), time.Now())
	if err != nil || !ok || rec.PID != first.Pid() {
		t.Fatalf("record after adoption: %+v %v %v, want pid %d", rec, ok, err, first.Pid())
	}

	// Without a pid file or record (lost, or a berth from before records),
	// the answering socket is enough, and the process running this root's
	// config is found, and named in a new pid file and record.
	pidFile := filepath.Join(root, "containerd", "containerd.pid")
	for _, p := range []string{pidFile, record} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	third, err := Start(ctx, Options{RootDir: root, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("third Start: %v", err)
	}
	if third.StartedByUs() || third.Pid() != first.Pid() {
		t.Errorf("third Start: StartedByUs=%v Pid=%d, want adopted pid %d", third.StartedByUs(), third.Pid(), first.Pid())
	}
	if data, err := os.ReadFile(pidFile); err != nil || strings.TrimSpace(string(data)) != strconv.Itoa(first.Pid()) {
		t.Errorf("pid file after adoption: %q, %v", data, err)
	}
	if rec, ok, err := ReadRecord(filepath.Dir(record), time.Now()); err != nil || !ok || rec.PID != first.Pid() {
		t.Errorf("record after adoption without one: %+v %v %v", rec, ok, err)
	}

	// The adopted containerd is berth's to stop, as the launched one is.
	if err := third.Stop(ctx); err != nil {
		t.Fatalf("Stop of an adopted containerd: %v", err)
	}
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("Stop of the adopted containerd left it running")
	}
	for _, p := range []string{pidFile, record} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Stop: %v", p, err)
		}
	}
}

func TestStartFailsWithLogTail(t *testing.T) {
	root := testRoot(t)
	// A containerd that cannot create its root exits at once.
	if err := os.MkdirAll(filepath.Join(root, "containerd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "containerd", "root"), []byte("not a dir"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Start(ctx, Options{RootDir: root, Log: testLogger(t)})
	if err == nil {
		stopManaged(t, m)
		t.Fatal("Start succeeded with a file where the root dir goes")
	}
	if !strings.Contains(err.Error(), "containerd exited") || !strings.Contains(err.Error(), "tail of") {
		t.Errorf("error does not tell that containerd exited and quote its log: %v", err)
	}
	t.Log(err)
}

func TestImportAndRunPod(t *testing.T) {
	root := testRoot(t)
	m := startManaged(t, root)
	rs, is := criClients(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Images: the pause image straight from memory, busybox from a tarball
	// dir that also holds a broken archive.
	pause, err := imagebuild.PauseImage(buildPause(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ImportImage(ctx, m.Address(), m.Snapshotter(), imagebuild.PauseImageRef, pause); err != nil {
		t.Fatalf("ImportImage: %v", err)
	}
	busybox, err := imagebuild.BusyboxImage("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	imageDir := t.TempDir()
	if err := imagebuild.WriteTarball(filepath.Join(imageDir, "busybox.tar"), imagebuild.BusyboxImageRef, busybox); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(imageDir, "broken.tar"), []byte("not a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(imageDir, "README"), []byte("ignored"), 0o644); err != nil {
		t.Fatal(err)
	}
	const ociRef = "berth.local/pause-oci:1.0"
	writeOCIArchive(t, filepath.Join(imageDir, "pause-oci.tar.gz"), ociRef, pause)
	// "" asks containerd which snapshotter its CRI plugin uses.
	imported, errs := ImportDir(ctx, m.Address(), "", imageDir, testLogger(t))
	if want := []string{imagebuild.BusyboxImageRef, ociRef}; !slices.Equal(imported, want) {
		t.Errorf("ImportDir imported %v, want %v", imported, want)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "broken.tar") {
		t.Errorf("ImportDir errors = %v, want one naming broken.tar", errs)
	}
	if imported, errs := ImportDir(ctx, m.Address(), m.Snapshotter(), filepath.Join(root, "nonexistent"), nil); imported != nil || errs != nil {
		t.Errorf("ImportDir of a missing dir = %v, %v", imported, errs)
	}
	for _, ref := range []string{imagebuild.PauseImageRef, imagebuild.BusyboxImageRef, ociRef} {
		st, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil || st.GetImage() == nil {
			t.Fatalf("CRI ImageStatus(%s) = %v, %v; want the image", ref, st, err)
		}
		if !strings.HasPrefix(st.GetImage().GetId(), "sha256:") || len(st.GetImage().GetRepoTags()) == 0 {
			t.Errorf("CRI image %s = %+v", ref, st.GetImage())
		}
	}

	// Task events, from before the container exists.
	events := make(chan TaskEvent, 64)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- WatchTasks(watchCtx, m.Address(), testLogger(t), func(ev TaskEvent) { events <- ev })
	}()
	defer func() {
		stopWatch()
		if err := <-watchDone; err != nil {
			t.Errorf("WatchTasks: %v", err)
		}
	}()

	cgroupParent := "/" + filepath.Base(root)
	t.Cleanup(func() { removeCgroup(t, cgroupParent) })
	sandboxConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "exit3", Namespace: "test", Uid: "uid-exit3"},
		LogDirectory: filepath.Join(root, "pods", "exit3"),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	if err := os.MkdirAll(sandboxConfig.LogDirectory, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	defer func() {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	}()
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: imagebuild.BusyboxImageRef},
			Command:  []string{"sh", "-c", "exit 3"},
			LogPath:  "main.log",
		},
		SandboxConfig: sandboxConfig,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	var exit TaskEvent
	for exit.Topic == "" {
		select {
		case ev := <-events:
			t.Logf("event %+v", ev)
			if ev.ContainerID == c.ContainerId && ev.Topic == TopicTaskExit {
				exit = ev
			}
		case <-ctx.Done():
			t.Fatal("no TaskExit event for the container")
		}
	}
	if exit.ExitCode != 3 || exit.At.IsZero() {
		t.Errorf("TaskExit = %+v, want exit code 3 and a time", exit)
	}
	// CRI handles the same exit event on its own, a moment later: right
	// after the event its status may still say RUNNING.
	for {
		st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if st.Status.ExitCode != 3 {
				t.Errorf("CRI reports exit code %d, want 3", st.Status.ExitCode)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRI still reports %v after the exit event", st.Status.State)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Errorf("RemoveContainer: %v", err)
	}
}

// writeOCIArchive writes img as a gzipped OCI image layout, named ref by the
// org.opencontainers.image.ref.name annotation (what buildkit and skopeo
// write).
func writeOCIArchive(t *testing.T, path, ref string, img ggcrv1.Image) {
	t.Helper()
	dir := t.TempDir()
	lp, err := ocilayout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, ocilayout.WithAnnotations(map[string]string{ocispec.AnnotationRefName: ref})); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}
