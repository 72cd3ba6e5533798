package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// Images are pulled through the CRI from a registry (here an in-process one
// on 127.0.0.1), and an image that cannot be pulled shows as ErrImagePull /
// ImagePullBackOff on its pod without disturbing the others.
func TestPullFromRegistry(t *testing.T) {
	n := startNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	host := ln.Addr().String()

	img, err := imagebuild.BusyboxImage(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host + "/e2e/busybox:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push to the test registry: %v", err)
	}
	// containerd reaches a plain-HTTP registry through a hosts.toml in the
	// config_path berth gives its managed containerd.
	hostsDir := filepath.Join(n.root, "containerd", "certs.d", host)
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostsToml := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host, host)
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(hostsToml), 0o644); err != nil {
		t.Fatal(err)
	}

	n.writeManifest("pulled.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: pulled}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s/e2e/busybox:v1
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, host))
	n.writeManifest("missing.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  containers:
  - name: main
    image: %s/e2e/nothing-here:v1
`, host))
	pod := n.waitRunning("pulled", 2*time.Minute)
	n.waitEvent("pulled", "Pulling", fmt.Sprintf("Pulling image %q", host+"/e2e/busybox:v1"))
	n.waitEvent("pulled", "Pulled", "Successfully pulled image")
	n.waitEvent("pulled", "Pulled", "including waiting). Image size: ")
	if id := pod.Status.ContainerStatuses[0].ImageID; !strings.HasPrefix(id, "sha256:") && !strings.Contains(id, "@sha256:") {
		t.Errorf("imageID %q is not a digest", id)
	}
	waitFor(t, time.Minute, "the missing image to be reported", func() (bool, string) {
		p := n.pod("missing")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, "no status"
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil {
			return false, describe(p)
		}
		return (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && strings.Contains(w.Message, "nothing-here"), describe(p)
	})
	n.waitEvent("missing", "Failed", "Failed to pull image")
	n.waitEvent("missing", "BackOff", "Back-off pulling image")
}

// `berth images import` imports a tarball into berth's runtime, and a pod
// with imagePullPolicy Never runs it.
func TestImagesImport(t *testing.T) {
	n := startNode(t)
	img, err := imagebuild.BusyboxImage(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	const ref = "berth.local/imported:e2e"
	tarball := filepath.Join(n.root, "imported.tar")
	if err := imagebuild.WriteTarball(tarball, ref, img); err != nil {
		t.Fatal(err)
	}
	out, err := n.berth("images", "import", "--root-dir", n.root, tarball)
	if err != nil || !strings.Contains(out, ref) {
		t.Fatalf("berth images import: %q, %v", out, err)
	}
	n.writeManifest("imported.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: imported}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, ref))
	n.waitRunning("imported", time.Minute)
	n.waitEvent("imported", "Pulled", fmt.Sprintf("Container image %q already present on machine", ref))

	// Never, and not present: the kubelet's ErrImageNeverPull, no pull.
	n.writeManifest("never.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: never}
spec:
  containers:
  - {name: main, image: "berth.local/not-imported:e2e", imagePullPolicy: Never}
`)
	waitFor(t, time.Minute, "pod never waiting with ErrImageNeverPull", func() (bool, string) {
		p := n.pod("never")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false, describe(p)
		}
		return p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImageNeverPull", describe(p)
	})
	n.waitEvent("never", "ErrImageNeverPull", `Container image "berth.local/not-imported:e2e" is not present with pull policy of Never`)
}
