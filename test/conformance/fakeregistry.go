package conformance

import (
	"fmt"
	"io"
	"path"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// fakeRegistryDir is where agnhost's fake-registry-server reads the images
// it serves (test/images/agnhost/fakeregistryserver of the release).
const fakeRegistryDir = "/var/registry"

// fakeRegistryFiles lays img out as agnhost's fake-registry-server serves
// it, as upstream's image build (prepare_registry.sh) does for
// registry.k8s.io/pause:3.10.2 under the tag "testing": the tag file holds
// the manifest's digest, and manifests and blobs are stored at
// <dir>/<algorithm>/<first two hex digits>/<hex>/data. Upstream stores the
// release's multi-platform index under the tag; this stores the one
// manifest of the host's platform, which a pull resolves the same way.
func fakeRegistryFiles(repo, tag string, img ggcrv1.Image) ([]imagebuild.File, error) {
	root := path.Join(fakeRegistryDir, repo)
	var files []imagebuild.File
	add := func(dir string, d ggcrv1.Hash, data []byte) {
		p := path.Join(root, dir, d.Algorithm, d.Hex[:2], d.Hex, "data")
		files = append(files, imagebuild.File{Path: p, Mode: 0o644, Data: data})
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("fake registry: manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("fake registry: digest: %w", err)
	}
	add("manifests", digest, manifest)
	files = append(files, imagebuild.File{Path: path.Join(root, "manifests", tag), Mode: 0o644, Data: []byte(digest.String() + "\n")})
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("fake registry: config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("fake registry: config digest: %w", err)
	}
	add("blobs", configName, config)
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("fake registry: layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest() // of the compressed blob, as the manifest names it
		if err != nil {
			return nil, fmt.Errorf("fake registry: layer digest: %w", err)
		}
		blob, err := readLayer(l)
		if err != nil {
			return nil, err
		}
		add("blobs", d, blob)
	}
	return files, nil
}

func readLayer(l ggcrv1.Layer) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("fake registry: layer: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("fake registry: layer: %w", err)
	}
	return data, nil
}
