package conformance

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// The registry serves each tarball's image under its registry.k8s.io path,
// with the config the tarball holds, and nothing of other registries; the
// mirror's hosts.toml points registry.k8s.io at it.
func TestRegistryMirrorsRegistryK8sIO(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "pause")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := imagebuild.PauseImage(fake)
	if err != nil {
		t.Fatal(err)
	}
	// The config names the image whatever manifest a tarball gets.
	want, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	mirrored := filepath.Join(dir, "pause.tar")
	other := filepath.Join(dir, "other.tar")
	if err := imagebuild.WriteTarball(mirrored, "registry.k8s.io/e2e-test-images/pause:1.0", img); err != nil {
		t.Fatal(err)
	}
	if err := imagebuild.WriteTarball(other, "invalid.registry.k8s.io/invalid/pause:1.0", img); err != nil {
		t.Fatal(err)
	}
	r, err := StartRegistry(context.Background(), []string{mirrored, other})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	ref, err := name.ParseReference(r.Addr+"/e2e-test-images/pause:1.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pull the mirrored image: %v", err)
	}
	if d, err := got.ConfigName(); err != nil || d != want {
		t.Errorf("config digest %v (%v), want %v", d, err, want)
	}
	ref, err = name.ParseReference(r.Addr+"/invalid/pause:1.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(ref); err == nil {
		t.Error("an image of another registry is served too")
	}

	root := t.TempDir()
	if err := r.WriteMirrorConfig(root); err != nil {
		t.Fatal(err)
	}
	hosts, err := os.ReadFile(filepath.Join(root, "containerd", "certs.d", "registry.k8s.io", "hosts.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hosts), `[host."http://`+r.Addr+`"]`) || !strings.Contains(string(hosts), `"pull", "resolve"`) {
		t.Errorf("hosts.toml:\n%s", hosts)
	}
}

// fakeRegistryFiles lays an image out as fake-registry-server reads it: the
// tag file names the manifest's digest, and the manifest's config and
// layers are blobs whose content has the digests the manifest gives.
func TestFakeRegistryFiles(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := imagebuild.PauseImage(fake)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fakeRegistryFiles("pause", "testing", img)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string][]byte{}
	for _, f := range files {
		byPath[f.Path] = f.Data
	}
	stored := func(dir, digest string) []byte {
		t.Helper()
		h, err := ggcrv1.NewHash(digest)
		if err != nil {
			t.Fatalf("%s: %v", digest, err)
		}
		p := path.Join("/var/registry/pause", dir, h.Algorithm, h.Hex[:2], h.Hex, "data")
		data, ok := byPath[p]
		if !ok {
			t.Fatalf("%s is not in the layout", p)
		}
		if sum, _, err := ggcrv1.SHA256(strings.NewReader(string(data))); err != nil || sum != h {
			t.Errorf("%s holds content of digest %v", p, sum)
		}
		return data
	}
	tag, ok := byPath["/var/registry/pause/manifests/testing"]
	if !ok {
		t.Fatal("no tag file")
	}
	var m ggcrv1.Manifest
	if err := json.Unmarshal(stored("manifests", strings.TrimSpace(string(tag))), &m); err != nil {
		t.Fatal(err)
	}
	stored("blobs", m.Config.Digest.String())
	if len(m.Layers) == 0 {
		t.Fatal("the manifest has no layers")
	}
	for _, l := range m.Layers {
		stored("blobs", l.Digest.String())
	}
}
