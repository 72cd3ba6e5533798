package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/images"
)

// busyboxVariant is the busybox image with a label of its own, so that it
// has an ID of its own.
func busyboxVariant(t *testing.T, variant string) ggcrv1.Image {
	t.Helper()
	base, err := imagebuild.BusyboxImage(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	c.Labels = map[string]string{"dev.berth.e2e/variant": variant}
	img, err := mutate.Config(base, c)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageTags returns the tags of every image n's runtime has.
func (n *node) imageTags() []string {
	n.t.Helper()
	var list []images.ImageStatus
	n.getJSON("/images", &list)
	var tags []string
	for _, img := range list {
		tags = append(tags, img.RepoTags...)
	}
	slices.Sort(tags)
	return tags
}

// Image GC removes unused images and only those: not the sandbox image, not
// a pinned one, not the images of running or completed pods, and an image
// only once nothing uses it any more.
func TestImageGC(t *testing.T) {
	cfg := writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 0
imageGCLowThresholdPercent: 0
imageMinimumGCAge: 15s
`)
	// High 0 and low 0: every GC tries to free the whole disk, so every
	// image it may remove, it does.
	n := startNode(t, "--config", cfg, "--image-gc-period", "1s", "--pinned-image", busybox)

	extra := filepath.Join(n.root, "extra")
	if err := os.MkdirAll(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, v := range []string{"a", "b", "c"} {
		file := filepath.Join(extra, v+".tar")
		if err := imagebuild.WriteTarball(file, "berth.local/gc-"+v+":1", busyboxVariant(t, v)); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	if out, err := n.berth(append([]string{"images", "import", "--root-dir", n.root}, files...)...); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	// Within imageMinimumGCAge of their import, pods take gc-a and gc-b.
	n.writeManifest("a.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: a}
spec:
  containers:
  - {name: app, image: "berth.local/gc-a:1", command: ["sleep", "3600"]}
`)
	n.writeManifest("b.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: b}
spec:
  restartPolicy: Never
  containers:
  - {name: once, image: "berth.local/gc-b:1", command: ["true"]}
`)
	n.waitRunning("a", 60*time.Second)
	waitFor(t, 60*time.Second, "pod b to complete", func() (bool, string) {
		p := n.pod("b")
		return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
	})

	kept := []string{"berth.local/busybox:1.35", "berth.local/gc-a:1", "berth.local/gc-b:1", imagebuild.PauseImageRef}
	waitFor(t, 90*time.Second, "gc-c, used by nothing, to be collected", func() (bool, string) {
		tags := n.imageTags()
		return slices.Equal(tags, kept), fmt.Sprint(tags)
	})
	if !n.removedByGC("berth.local/gc-c:1") {
		t.Errorf("no %s event for gc-c: %v", images.ReasonImageGarbageCollected, n.nodeEvents())
	}
	out, err := n.berth("images")
	if err != nil || !strings.Contains(out, "pinned (sandbox image)") || !strings.Contains(out, "gc-a") {
		t.Errorf("berth images: %v\n%s", err, out)
	}

	// Pod b's manifest goes: its image is unused now, and collected.
	n.removeManifest("b.yaml")
	waitFor(t, 90*time.Second, "gc-b to be collected once pod b is gone", func() (bool, string) {
		tags := n.imageTags()
		return !slices.Contains(tags, "berth.local/gc-b:1"), fmt.Sprint(tags)
	})
	if tags := n.imageTags(); !slices.Contains(tags, "berth.local/gc-a:1") || !slices.Contains(tags, imagebuild.PauseImageRef) ||
		!slices.Contains(tags, "berth.local/busybox:1.35") {
		t.Errorf("an image in use or pinned was collected: %v", tags)
	}
	if !n.removedByGC("berth.local/gc-b:1") {
		t.Errorf("no %s event for gc-b", images.ReasonImageGarbageCollected)
	}
}

// removedByGC tells whether a node event reports image's collection.
func (n *node) removedByGC(image string) bool {
	for _, e := range n.nodeEvents() {
		if e.Reason == images.ReasonImageGarbageCollected && strings.Contains(e.Message, image) {
			return true
		}
	}
	return false
}
