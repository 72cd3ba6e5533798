package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
	// The event follows the removal it reports.
	waitFor(t, 10*time.Second, "the "+images.ReasonImageGarbageCollected+" event for gc-c", func() (bool, string) {
		return n.removedByGC("berth.local/gc-c:1"), fmt.Sprint(n.nodeEvents())
	})
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
	waitFor(t, 10*time.Second, "the "+images.ReasonImageGarbageCollected+" event for gc-b", func() (bool, string) {
		return n.removedByGC("berth.local/gc-b:1"), fmt.Sprint(n.nodeEvents())
	})
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

// heavyVariant is busyboxVariant with a layer of size random bytes, so that
// its size on disk is known and large.
func heavyVariant(t *testing.T, variant string, size int64) ggcrv1.Image {
	t.Helper()
	layer, err := random.Layer(size, types.DockerLayer)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(busyboxVariant(t, variant), layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageSize returns the size the runtime reports for the image tagged tag.
func (n *node) imageSize(tag string) int64 {
	n.t.Helper()
	var list []images.ImageStatus
	n.getJSON("/images", &list)
	for _, img := range list {
		if slices.Contains(img.RepoTags, tag) {
			return img.Size
		}
	}
	n.t.Fatalf("no image %s", tag)
	return 0
}

// With the image filesystem pushed just past the threshold, image GC frees
// what the seed's formula asks, least recently used first: of three unused
// images used in the order A, B, C, it removes A and B, which free enough,
// and keeps C, the sandbox image and the pinned one.
func TestImageGCFreesLeastRecentlyUsed(t *testing.T) {
	// high = low = 50: the GC starts at 50% used and frees down to 50%.
	cfg := writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 50
imageGCLowThresholdPercent: 50
imageMinimumGCAge: 0s
evictionHard: {memory.available: 1Mi}
`)
	n := startNodeOnTmpfs(t, "400m", "--config", cfg, "--image-gc-period", "1s", "--pinned-image", busybox)

	var files []string
	for _, v := range []string{"a", "b", "c"} {
		file := filepath.Join(t.TempDir(), v+".tar")
		if err := imagebuild.WriteTarball(file, "berth.local/lru-"+v+":1", heavyVariant(t, v, 24<<20)); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	if out, err := n.berth(append([]string{"images", "import", "--root-dir", n.root}, files...)...); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	// Use A, then B, then C, one pod at a time: their last-used times are
	// in that order.
	for _, v := range []string{"a", "b", "c"} {
		n.writeManifest("lru.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: lru-%s}
spec:
  restartPolicy: Never
  containers:
  - {name: once, image: "berth.local/lru-%s:1", command: ["true"]}
`, v, v))
		waitFor(t, 60*time.Second, "pod lru-"+v+" to complete and its image to be seen in use", func() (bool, string) {
			p := n.pod("lru-" + v)
			var list []images.ImageStatus
			n.getJSON("/images", &list)
			seen := slices.ContainsFunc(list, func(img images.ImageStatus) bool {
				return slices.Contains(img.RepoTags, "berth.local/lru-"+v+":1") && !img.LastUsed.IsZero()
			})
			return p != nil && p.Status.Phase == v1.PodSucceeded && seen, describe(p)
		})
		n.removeManifest("lru.yaml")
		waitFor(t, 30*time.Second, "pod lru-"+v+" to be gone", func() (bool, string) {
			return n.pod("lru-"+v) == nil, "still there"
		})
	}

	// Fill the filesystem so that the GC must free more than A's size and
	// no more than A's and B's: capacity × (100 − 50)/100 − available =
	// size(A) + size(B)/2.
	sizeA, sizeB := n.imageSize("berth.local/lru-a:1"), n.imageSize("berth.local/lru-b:1")
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.root, &st); err != nil {
		t.Fatal(err)
	}
	capacity, available := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	target := capacity/2 - (sizeA + sizeB/2)
	ballast := available - target
	if ballast <= 0 {
		t.Fatalf("the node already uses too much: capacity %d, available %d, images %d and %d", capacity, available, sizeA, sizeB)
	}
	// One fallocate: a GC round (every second) that read the filesystem
	// while a write was under way saw less to free than A and B, freed
	// A alone, and then found nothing more to do (once in CI).
	f, err := os.Create(filepath.Join(n.root, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, ballast); err != nil {
		t.Fatal(err)
	}
	f.Close()

	want := []string{"berth.local/busybox:1.35", "berth.local/lru-c:1", imagebuild.PauseImageRef}
	waitFor(t, 60*time.Second, "the GC to take A and B", func() (bool, string) {
		tags := n.imageTags()
		return slices.Equal(tags, want), fmt.Sprint(tags)
	})
	// Each removal is an event, recorded once the runtime has removed the
	// image: A went before B.
	var order []string
	waitFor(t, 10*time.Second, "an "+images.ReasonImageGarbageCollected+" event for A and for B", func() (bool, string) {
		order = nil
		for _, e := range n.nodeEvents() {
			if e.Reason == images.ReasonImageGarbageCollected {
				order = append(order, e.Message)
			}
		}
		return len(order) >= 2, fmt.Sprint(order)
	})
	if len(order) != 2 || !strings.Contains(order[0], "lru-a") || !strings.Contains(order[1], "lru-b") {
		t.Errorf("removal order %q, want lru-a then lru-b", order)
	}
}
