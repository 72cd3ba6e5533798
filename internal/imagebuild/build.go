// Package imagebuild builds small OCI images from local files, so that berth
// and its tests never need a registry on the internet: the sandbox ("pause")
// image and a busybox image for tests are made from binaries on the host.
// Images are reproducible: the same inputs always give the same digest.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of an image layer. Exactly one kind applies: a
// directory (Dir), a symbolic link (Linkname set), or a regular file (Data).
type File struct {
	// Path inside the image; "/bin/sh" and "bin/sh" are the same entry.
	Path string
	// Mode holds the permission bits, including setuid, setgid and sticky
	// (0o1777 for /tmp). Zero means 0o755 for directories and 0o644 for
	// files; it is ignored for symlinks.
	Mode     int64
	Data     []byte
	Linkname string
	Dir      bool
}

// epoch is the timestamp of every entry and of the image itself: a fixed
// time is what makes the digest depend on the content alone.
func epoch() time.Time { return time.Unix(0, 0).UTC() }

// Build returns a single-layer linux image for the host's architecture that
// holds files and runs with cfg. Parent directories that files does not list
// are added with mode 0755, as a container runtime expects them to exist.
func Build(files []File, cfg ggcrv1.Config) (ggcrv1.Image, error) {
	entries, err := layerEntries(files)
	if err != nil {
		return nil, err
	}
	blob, err := gzipTar(entries)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}

	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   ggcrv1.History{Created: ggcrv1.Time{Time: epoch()}, CreatedBy: "berth imagebuild"},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = ggcrv1.Time{Time: epoch()}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// layerEntries validates files, adds missing parent directories and returns
// tar headers (with their data) in path order. Entries are keyed by their
// path without the trailing slash tar gives directories.
func layerEntries(files []File) ([]entry, error) {
	byPath := make(map[string]entry, len(files))
	for i, f := range files {
		e, err := toEntry(f)
		if err != nil {
			return nil, fmt.Errorf("file %d (%q): %w", i, f.Path, err)
		}
		key := strings.TrimSuffix(e.hdr.Name, "/")
		if _, dup := byPath[key]; dup {
			return nil, fmt.Errorf("file %d (%q): path given twice", i, f.Path)
		}
		byPath[key] = e
	}
	for name := range byPath {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			parent, ok := byPath[dir]
			if !ok {
				byPath[dir] = dirEntry(dir, 0o755)
				continue
			}
			if parent.hdr.Typeflag != tar.TypeDir {
				return nil, fmt.Errorf("file %q: parent %q is not a directory", "/"+name, "/"+dir)
			}
		}
	}
	out := make([]entry, 0, len(byPath))
	for _, e := range byPath {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hdr.Name < out[j].hdr.Name })
	return out, nil
}

type entry struct {
	hdr  tar.Header
	data []byte
}

func toEntry(f File) (entry, error) {
	name := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
	if name == "" {
		return entry{}, fmt.Errorf("path names the root directory")
	}
	if f.Mode&^0o7777 != 0 {
		return entry{}, fmt.Errorf("mode %#o has bits beyond permissions, setuid, setgid and sticky", f.Mode)
	}
	switch {
	case f.Dir:
		if f.Data != nil || f.Linkname != "" {
			return entry{}, fmt.Errorf("a directory has neither data nor a link target")
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		return dirEntry(name, mode), nil
	case f.Linkname != "":
		if f.Data != nil {
			return entry{}, fmt.Errorf("a symlink has no data")
		}
		return entry{hdr: tar.Header{
			Typeflag: tar.TypeSymlink, Name: name, Linkname: f.Linkname, Mode: 0o777, ModTime: epoch(),
		}}, nil
	default:
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		return entry{hdr: tar.Header{
			Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(f.Data)), ModTime: epoch(),
		}, data: f.Data}, nil
	}
}

func dirEntry(name string, mode int64) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: epoch()}}
}

// gzipTar writes entries as a gzip-compressed tar. The gzip header carries
// no name and no time, so the bytes depend on the entries alone.
func gzipTar(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("tar header %q: %w", e.hdr.Name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar data %q: %w", e.hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}
