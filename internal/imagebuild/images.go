package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// PauseImageRef names berth's sandbox image. The registry host does not
	// exist: the image only ever comes from an import, never from a pull.
	PauseImageRef = "berth.local/pause:1.0"
	// BusyboxImageRef names the test image built from the host's
	// busybox-static; the tag is the version Debian 12 ships.
	BusyboxImageRef = "berth.local/busybox:1.35"
)

// busyboxListTimeout bounds `busybox --list`, which answers at once.
const busyboxListTimeout = 10 * time.Second

// PauseImage packages the berth-pause binary as the sandbox image.
func PauseImage(pauseBinary string) (ggcrv1.Image, error) {
	data, err := os.ReadFile(pauseBinary)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	return Build([]File{{Path: "/pause", Mode: 0o755, Data: data}},
		ggcrv1.Config{Entrypoint: []string{"/pause"}})
}

// BusyboxImage packages a static busybox with a /bin symlink for each of its
// applets and the few files a shell expects (/etc/passwd, /tmp, a home).
func BusyboxImage(busyboxBinary string) (ggcrv1.Image, error) {
	data, err := os.ReadFile(busyboxBinary)
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), busyboxListTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, busyboxBinary, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox image: %s --list: %w", busyboxBinary, err)
	}
	links, err := appletLinks(out)
	if err != nil {
		return nil, fmt.Errorf("busybox image: %s --list: %w", busyboxBinary, err)
	}
	files := append([]File{
		{Path: "/bin/busybox", Mode: 0o755, Data: data},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/bin/sh\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(
			"root:x:0:\n" +
				"nobody:x:65534:\n")},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/root", Mode: 0o700, Dir: true},
		{Path: "/var/www", Mode: 0o755, Dir: true},
	}, links...)
	return Build(files, ggcrv1.Config{
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Cmd: []string{"sh"},
	})
}

// appletLinks turns the output of `busybox --list` (one applet per line)
// into /bin/<applet> -> busybox symlinks. /bin/sh is always among them: the
// image's Cmd depends on it.
func appletLinks(list []byte) ([]File, error) {
	var links []File
	seen := map[string]bool{}
	for _, line := range strings.Split(string(list), "\n") {
		applet := strings.TrimSpace(line)
		if applet == "" || applet == "busybox" || seen[applet] {
			continue
		}
		if strings.ContainsAny(applet, "/ \t") || applet == "." || applet == ".." {
			return nil, fmt.Errorf("applet name %q is not a file name", applet)
		}
		seen[applet] = true
		links = append(links, File{Path: "/bin/" + applet, Linkname: "busybox"})
	}
	if !seen["sh"] {
		return nil, fmt.Errorf("no sh applet among %d applets", len(links))
	}
	return links, nil
}

// WriteTarball writes img as a docker-archive tarball tagged ref (what
// `docker save` writes; containerd and `ctr images import` read it). The
// file appears complete or not at all.
func WriteTarball(path string, ref string, img ggcrv1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename this fails harmlessly

	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
