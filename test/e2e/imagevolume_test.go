package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// Image volumes (volumes[].image), as the v1.36 kubelet does them.

const (
	imgVolData   = "berth.local/imgvol-data:1"
	imgVolUnused = "berth.local/imgvol-unused:1"
)

// importImages writes each image to a tarball and imports them into n's
// runtime.
func importImages(t *testing.T, n *node, imgs map[string]ggcrv1.Image) {
	t.Helper()
	var files []string
	for ref, img := range imgs {
		file := filepath.Join(t.TempDir(), strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
		if err := imagebuild.WriteTarball(file, ref, img); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	if out, err := n.berth(append([]string{"images", "import", "--root-dir", n.root}, files...)...); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
}

// dataImage is an image of files only: no shell, no entrypoint.
func dataImage(t *testing.T, greeting string) ggcrv1.Image {
	t.Helper()
	img, err := imagebuild.Build([]imagebuild.File{
		{Path: "/data/hello.txt", Data: []byte(greeting)},
		{Path: "/data/sub/inner.txt", Data: []byte("inner file\n")},
	}, ggcrv1.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// execResult runs cmd in container name of pod and returns its output and
// exit code, whatever the code.
func (n *node) execResult(pod *v1.Pod, name string, cmd ...string) (string, int32) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stdout, stderr, code, err := n.cri.ExecSync(ctx, containerID(n.t, pod, name), cmd, 10*time.Second)
	if err != nil {
		n.t.Fatalf("exec %v in %s: %v", cmd, name, err)
	}
	return string(stdout) + string(stderr), code
}

// On containerd 2, an image volume mounts the image's files read-only at
// the mount path, a subPath mounts a directory of it, the pull follows the
// volume's pullPolicy, and image GC keeps the image while the pod uses it.
func TestImageVolumeOnContainerd2(t *testing.T) {
	cfg := writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 0
imageGCLowThresholdPercent: 0
imageMinimumGCAge: 15s
`)
	// High 0 and low 0: every GC removes every image it may.
	n := startNodeOnContainerd2(t, "--config", cfg, "--image-gc-period", "1s", "--pinned-image", busybox)
	importImages(t, n, map[string]ggcrv1.Image{
		imgVolData:   dataImage(t, "hello from an image volume\n"),
		imgVolUnused: dataImage(t, "nobody mounts this\n"),
	})
	n.writeManifest("imgvol.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: imgvol}
spec:
  containers:
  - name: app
    image: `+busybox+`
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: data, mountPath: /vol}
    - {name: data, mountPath: /sub, subPath: data/sub}
  volumes:
  - name: data
    image: {reference: "`+imgVolData+`", pullPolicy: IfNotPresent}
`)
	// Never: an image that is not there is never pulled.
	n.writeManifest("imgvol-never.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: imgvol-never}
spec:
  containers:
  - name: app
    image: `+busybox+`
    command: ["sleep", "3600"]
    volumeMounts: [{name: data, mountPath: /vol}]
  volumes:
  - name: data
    image: {reference: "berth.local/imgvol-missing:1", pullPolicy: Never}
`)
	pod := n.waitRunning("imgvol", 90*time.Second)

	if got := n.exec(pod, "app", "cat", "/vol/data/hello.txt"); got != "hello from an image volume\n" {
		t.Errorf("/vol/data/hello.txt = %q", got)
	}
	if got := n.exec(pod, "app", "cat", "/sub/inner.txt"); got != "inner file\n" {
		t.Errorf("subPath: /sub/inner.txt = %q", got)
	}
	if got, _ := n.execResult(pod, "app", "ls", "/sub"); strings.TrimSpace(got) != "inner.txt" {
		t.Errorf("subPath: /sub holds %q, want only inner.txt", got)
	}
	for _, cmd := range [][]string{
		{"touch", "/vol/new"},
		{"sh", "-c", "echo x > /vol/data/hello.txt"},
		{"touch", "/sub/new"},
	} {
		out, code := n.execResult(pod, "app", cmd...)
		if code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("%v in the image volume: code %d, %q; want EROFS", cmd, code, out)
		}
	}

	waitFor(t, 60*time.Second, "imgvol-never waiting with ErrImageNeverPull", func() (bool, string) {
		p := n.pod("imgvol-never")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return false, describe(p)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "ErrImageNeverPull" && strings.Contains(w.Message, "imgvol-missing"), describe(p)
	})
	if cs := n.containers(string(n.pod("imgvol-never").UID)); len(cs) != 0 {
		t.Errorf("imgvol-never: %d containers created without their image volume", len(cs))
	}

	// The GC runs (it takes the unused image) and keeps the mounted one.
	waitFor(t, 90*time.Second, imgVolUnused+" to be collected", func() (bool, string) {
		tags := n.imageTags()
		return !slices.Contains(tags, imgVolUnused), fmt.Sprint(tags)
	})
	if tags := n.imageTags(); !slices.Contains(tags, imgVolData) {
		t.Fatalf("image GC removed %s, mounted by a running pod: %v", imgVolData, tags)
	}
	if got := n.exec(pod, "app", "cat", "/vol/data/hello.txt"); got != "hello from an image volume\n" {
		t.Errorf("after GC: /vol/data/hello.txt = %q", got)
	}
}

// On containerd 1.6, which cannot mount images, a pod with an image volume
// is refused at admission, naming the volume and the runtime's version: it
// never gets a sandbox, and is not retried.
func TestImageVolumeRefusedOnContainerd16(t *testing.T) {
	// The host's containerd (Debian's 1.6), whatever runtime the run's
	// other nodes manage.
	n := startNodeWithRuntime(t, "", "")
	var version string
	waitFor(t, 30*time.Second, "the runtime's version", func() (bool, string) {
		v, err := n.cri.Version(context.Background())
		if err != nil {
			return false, err.Error()
		}
		version = v.RuntimeVersion
		return true, ""
	})
	if !strings.HasPrefix(strings.TrimPrefix(version, "v"), "1.") {
		t.Fatalf("this test needs the host's containerd to be 1.x; it is %s", version)
	}
	n.writeManifest("imgvol.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: imgvol}
spec:
  containers:
  - name: app
    image: `+busybox+`
    command: ["sleep", "3600"]
    volumeMounts: [{name: tools, mountPath: /tools}]
  volumes:
  - name: tools
    image: {reference: "berth.local/tools:1", pullPolicy: Never}
`)
	var pod *v1.Pod
	waitFor(t, 60*time.Second, "imgvol rejected", func() (bool, string) {
		pod = n.pod("imgvol")
		return pod != nil && pod.Status.Phase == v1.PodFailed, describe(pod)
	})
	for _, want := range []string{`volume "tools"`, "image volumes", "containerd " + version} {
		if !strings.Contains(pod.Status.Message, want) {
			t.Errorf("message %q lacks %q", pod.Status.Message, want)
		}
	}
	if pod.Status.Reason != "UnsupportedVolume" {
		t.Errorf("reason %q, want UnsupportedVolume", pod.Status.Reason)
	}
	if !hasEvent(n.events("imgvol"), v1.EventTypeWarning, "UnsupportedVolume", "") {
		t.Errorf("no UnsupportedVolume event: %v", n.events("imgvol"))
	}
	if sbs := n.sandboxes(string(pod.UID)); len(sbs) != 0 {
		t.Errorf("a refused pod got %d sandboxes", len(sbs))
	}
}

// On containerd 2, an image volume with pullPolicy Always is pulled from
// its registry (here an in-process one on 127.0.0.1) with the kubelet's
// events, and mounted.
func TestImageVolumePulledOnContainerd2(t *testing.T) {
	// Busybox is pinned: the machine's disk may be past the image GC's
	// threshold, and nothing uses it until the pod starts.
	n := startNodeOnContainerd2(t, "--pinned-image", busybox)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	host := ln.Addr().String()
	ref := host + "/e2e/imgvol-data:v1"
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(parsed, dataImage(t, "pulled for a volume\n")); err != nil {
		t.Fatalf("push to the test registry: %v", err)
	}
	hostsDir := filepath.Join(n.root, "containerd", "certs.d", host)
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostsToml := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host, host)
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(hostsToml), 0o644); err != nil {
		t.Fatal(err)
	}
	n.writeManifest("pulled.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: pulled}
spec:
  containers:
  - name: app
    image: `+busybox+`
    command: ["sleep", "3600"]
    volumeMounts: [{name: data, mountPath: /vol}]
  volumes:
  - name: data
    image: {reference: "`+ref+`", pullPolicy: Always}
`)
	pod := n.waitRunning("pulled", 2*time.Minute)
	n.waitEvent("pulled", "Pulling", fmt.Sprintf("Pulling image %q", ref))
	n.waitEvent("pulled", "Pulled", fmt.Sprintf("Successfully pulled image %q", ref))
	if got := n.exec(pod, "app", "cat", "/vol/data/hello.txt"); got != "pulled for a volume\n" {
		t.Errorf("/vol/data/hello.txt = %q", got)
	}
}
