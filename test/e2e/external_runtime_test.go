package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/noderuntime"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// With the relist effectively off, a container's exit still reaches a berth
// that runs pods on a containerd it does not manage, given as
// --container-runtime-endpoint: through the CRI's GetContainerEvents where
// the runtime has it (containerd 2), through containerd's own task events
// on the same socket where it does not (containerd 1.6, Debian 12's).
// Without either the pod would wait for a periodic sync (a minute).
func TestExternalContainerdExitsArriveByEvent(t *testing.T) {
	for _, tc := range []struct {
		name, runtimeDir string
		// taskEvents says berth must fall back to containerd's task events.
		taskEvents bool
	}{
		{"containerd 1.6", "", true},
		{"containerd 2", containerd2Dir(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := startExternalContainerd(t, tc.runtimeDir)
			n := startNode(t, "--relist-period", "1h", "--container-runtime-endpoint", endpoint)
			n.writeManifest("once.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "sleep 1"]
`, busybox))
			// The worker's own resync is a minute; 30 s is far inside it.
			waitFor(t, 30*time.Second, "the pod to succeed", func() (bool, string) {
				p := n.pod("once")
				return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
			})
			const fallback = "following containerd's task events on its socket"
			data, err := os.ReadFile(filepath.Join(n.root, "berth.log"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(data), fallback); got != tc.taskEvents {
				t.Errorf("berth's log says %q: %v, want %v", fallback, got, tc.taskEvents)
			}
		})
	}
}

// startExternalContainerd starts a containerd of runtimeDir ("" for the
// host's) on a root dir of its own, as a user would run one beside berth,
// with the pause and busybox images imported and no CNI network (its pods
// use the host's), and returns its CRI endpoint. Clean-up stops it once
// the node using it has removed its pods (cleanups run last first), and
// fails the test if anything of it is left running.
func startExternalContainerd(t *testing.T, runtimeDir string) string {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "berth-e2e-ext-")
	if err != nil {
		t.Fatal(err)
	}
	binary := "containerd"
	if runtimeDir != "" {
		binary = filepath.Join(runtimeDir, "containerd")
		// Its shim and runc, as berth's PATH has them for a managed one.
		t.Setenv("PATH", runtimeDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := containerd.Start(ctx, containerd.Options{
		RootDir: root, Binary: binary, CNIConfDir: filepath.Join(root, "net.d"),
		NetworkLater: true, SandboxImage: noderuntime.SandboxImage, Log: log,
	})
	if err != nil {
		os.RemoveAll(root)
		t.Fatalf("start the external containerd: %v", err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Stop(stopCtx); err != nil {
			t.Errorf("cleanup: stop the external containerd: %v", err)
		}
		killLeftovers(t, root)
		unmountUnder(t, root)
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	pause, err := imagebuild.PauseImage(filepath.Join(bins, "berth-pause"))
	if err != nil {
		t.Fatal(err)
	}
	if err := containerd.ImportImage(ctx, m.Address(), m.Snapshotter(), noderuntime.SandboxImage, pause); err != nil {
		t.Fatalf("import the pause image: %v", err)
	}
	img, err := imagebuild.BusyboxImage(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := containerd.ImportImage(ctx, m.Address(), m.Snapshotter(), busybox, img); err != nil {
		t.Fatalf("import busybox: %v", err)
	}
	return m.Endpoint()
}
