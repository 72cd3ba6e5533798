package imagebuild

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const hostBusybox = "/bin/busybox"

// layerHeaders returns the tar headers of img's only layer, by path.
func layerHeaders(t *testing.T, img ggcrv1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("image has %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

func digestOf(t *testing.T, img ggcrv1.Image) ggcrv1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBuildIsReproducible(t *testing.T) {
	files := []File{
		{Path: "/etc/hostname", Data: []byte("x\n")},
		{Path: "/bin/tool", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
		{Path: "/bin/alias", Linkname: "tool"},
	}
	cfg := ggcrv1.Config{Entrypoint: []string{"/bin/tool"}}
	first, err := Build(files, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reordered := []File{files[2], files[0], files[1]}
	second, err := Build(reordered, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digestOf(t, first), digestOf(t, second); a != b {
		t.Errorf("same files in another order give %s and %s", a, b)
	}

	changed, err := Build([]File{files[0], files[1], {Path: "/bin/alias", Linkname: "other"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if digestOf(t, changed) == digestOf(t, first) {
		t.Error("a different link target gives the same digest")
	}
}

func TestBuildLayerAndConfig(t *testing.T) {
	img, err := Build([]File{
		{Path: "/usr/local/bin/app", Mode: 0o4755, Data: []byte("bin")},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/etc/motd", Data: []byte("hi")},
	}, ggcrv1.Config{Cmd: []string{"app"}, WorkingDir: "/tmp", User: "65534"})
	if err != nil {
		t.Fatal(err)
	}
	hdrs := layerHeaders(t, img)
	want := map[string]struct {
		typ  byte
		mode int64
	}{
		"usr/":              {tar.TypeDir, 0o755},
		"usr/local/":        {tar.TypeDir, 0o755},
		"usr/local/bin/":    {tar.TypeDir, 0o755},
		"usr/local/bin/app": {tar.TypeReg, 0o4755},
		"tmp/":              {tar.TypeDir, 0o1777},
		"etc/":              {tar.TypeDir, 0o755},
		"etc/motd":          {tar.TypeReg, 0o644},
	}
	if len(hdrs) != len(want) {
		t.Errorf("layer has %d entries, want %d: %v", len(hdrs), len(want), hdrs)
	}
	for p, w := range want {
		h, ok := hdrs[p]
		if !ok {
			t.Errorf("layer lacks %q", p)
			continue
		}
		if h.Typeflag != w.typ || h.Mode != w.mode {
			t.Errorf("%q: type %q mode %#o, want %q %#o", p, h.Typeflag, h.Mode, w.typ, w.mode)
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%q: mtime %v uid %d gid %d, want epoch and root", p, h.ModTime, h.Uid, h.Gid)
		}
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if cf.Config.WorkingDir != "/tmp" || cf.Config.User != "65534" || len(cf.Config.Cmd) != 1 {
		t.Errorf("config = %+v", cf.Config)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
}

func TestBuildRejectsBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []File
		want  string
	}{
		{"root", []File{{Path: "/", Dir: true}}, "root directory"},
		{"duplicate", []File{{Path: "/a"}, {Path: "a"}}, "given twice"},
		{"parent is a file", []File{{Path: "/a", Data: []byte("x")}, {Path: "/a/b"}}, "not a directory"},
		{"parent is a link", []File{{Path: "/a", Linkname: "b"}, {Path: "/a/b"}}, "not a directory"},
		{"file type bits", []File{{Path: "/a", Mode: 0o100644}}, "beyond permissions"},
		{"dir with data", []File{{Path: "/a", Dir: true, Data: []byte("x")}}, "neither data"},
		{"link with data", []File{{Path: "/a", Linkname: "b", Data: []byte("x")}}, "no data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.files, ggcrv1.Config{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestAppletLinks(t *testing.T) {
	links, err := appletLinks([]byte("[\nbusybox\nls\nsh\n\nls\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range links {
		got[l.Path] = l.Linkname
	}
	want := map[string]string{"/bin/[": "busybox", "/bin/ls": "busybox", "/bin/sh": "busybox"}
	if len(got) != len(want) {
		t.Errorf("links = %v, want %v", got, want)
	}
	for p, target := range want {
		if got[p] != target {
			t.Errorf("%s -> %q, want %q", p, got[p], target)
		}
	}

	if _, err := appletLinks([]byte("ls\ncat\n")); err == nil {
		t.Error("a list without sh is accepted")
	}
	if _, err := appletLinks([]byte("sh\n../etc/x\n")); err == nil {
		t.Error("an applet name with a slash is accepted")
	}
}

func TestBusyboxImage(t *testing.T) {
	img, err := BusyboxImage(hostBusybox)
	if err != nil {
		t.Fatal(err)
	}
	hdrs := layerHeaders(t, img)

	out, err := exec.Command(hostBusybox, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	applets := strings.Fields(string(out))
	if len(applets) < 100 {
		t.Fatalf("busybox lists only %d applets", len(applets))
	}
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		h, ok := hdrs["bin/"+a]
		if !ok || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("applet %s: entry %+v, want a symlink to busybox", a, h)
		}
	}
	if h := hdrs["bin/busybox"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Errorf("bin/busybox = %+v, want an executable file", h)
	}
	for p, mode := range map[string]int64{"tmp/": 0o1777, "root/": 0o700, "var/www/": 0o755, "etc/passwd": 0o644, "etc/group": 0o644} {
		if h := hdrs[p]; h == nil || h.Mode != mode {
			t.Errorf("%s = %+v, want mode %#o", p, h, mode)
		}
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Cmd, " ") != "sh" || len(cf.Config.Env) != 1 || !strings.HasPrefix(cf.Config.Env[0], "PATH=") {
		t.Errorf("config = %+v", cf.Config)
	}

	again, err := BusyboxImage(hostBusybox)
	if err != nil {
		t.Fatal(err)
	}
	if digestOf(t, img) != digestOf(t, again) {
		t.Error("two builds of the busybox image differ")
	}
}

// The tag of BusyboxImageRef promises a version: catch the host's busybox
// drifting away from it.
func TestBusyboxTagMatchesHostVersion(t *testing.T) {
	out, _ := exec.Command(hostBusybox, "--help").CombinedOutput()
	first, _, _ := strings.Cut(string(out), "\n")
	tag := BusyboxImageRef[strings.LastIndex(BusyboxImageRef, ":")+1:]
	if !strings.Contains(first, "BusyBox v"+tag+".") {
		t.Errorf("host busybox says %q; BusyboxImageRef tag is %s", first, tag)
	}
}

func TestPauseImageAndTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := PauseImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	if h := layerHeaders(t, img)["pause"]; h == nil || h.Mode != 0o755 {
		t.Errorf("pause entry = %+v", h)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/pause" {
		t.Errorf("entrypoint = %v", cf.Config.Entrypoint)
	}

	out := filepath.Join(dir, "pause.tar")
	if err := WriteTarball(out, PauseImageRef, img); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(PauseImageRef)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	// A docker archive keeps config and layers, so the config digest (the
	// image ID CRI reports) survives the round trip.
	want, _ := img.ConfigName()
	got, err := back.ConfigName()
	if err != nil || got != want {
		t.Errorf("config digest after round trip = %v (%v), want %v", got, err, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want pause and pause.tar (no temp file left)", len(entries))
	}

	if err := WriteTarball(filepath.Join(dir, "x.tar"), "Not A Ref", img); err == nil {
		t.Error("a bad reference is accepted")
	}
}
