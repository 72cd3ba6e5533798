package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// Image is one test image the selected specs run, under the exact names of
// test/utils/image/manifest.go of the upstream release, built locally: no
// registry is ever asked. Substitute is empty when the image holds what
// upstream's does (the same program, built from the same sources); else it
// says what stands in for it.
type Image struct {
	Names      []string
	From       string // what it is built from
	Substitute string // how it differs from upstream's; empty if it does not
	build      func(in ImageInputs) (ggcrv1.Image, error)
}

// ImageInputs are the local files the images are made of.
type ImageInputs struct {
	Programs Programs
	Pause    string // berth's berth-pause binary
	Busybox  string // a static busybox (Debian's busybox-static)
	StandIns        // curl, dig, getent, a netcat and hostpathplugin's proxy mode
}

const e2eRegistry = "registry.k8s.io/e2e-test-images/"

// hostpathpluginImage is the image the DRA specs' driver pods run: the
// newest hostpathplugin tag of test/e2e/testing-manifests/storage-csi, which
// test/e2e/dra/utils/deploy.go puts in place of the manifest's
// to-be-replaced.
const hostpathpluginImage = "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1"

// Images lists what BuildImages writes. Images the selection needs but that
// are absent on purpose (invalid.registry.k8s.io, the private registry) are
// in CONFORMANCE.md.
func Images() []Image {
	return []Image{
		{
			Names: []string{e2eRegistry + "agnhost:2.63.0", e2eRegistry + "agnhost:2.55"},
			From:  "k8s.io/kubernetes/test/images/agnhost (static) on a busybox userland",
			Substitute: "busybox instead of alpine; curl is test/conformance/curl, a stand-in for the GETs the suite asks of curl; " +
				"dig and getent are test/conformance/dig and getent, stand-ins for the queries of the DNS specs; " +
				"nc is test/conformance/nc, a stand-in for OpenBSD netcat's TCP and UDP exchanges (busybox's nc has no -u, -v or -t; " +
				"the image's busybox has its nc applet renamed nd, as its sh runs its own applets before PATH's programs); " +
				"the fake registry serves berth's pause image as pause:testing instead of upstream's; " +
				"no iperf or coredns; agnhost:2.55 is the same 2.63.0 build under the older tag",
			build: agnhostImage,
		},
		{
			Names:      []string{e2eRegistry + "busybox:1.37.0-1"},
			From:       "Debian's busybox-static with an applet symlink each (internal/imagebuild)",
			Substitute: "busybox 1.35 of Debian 12 under the 1.37.0-1 tag",
			build:      func(in ImageInputs) (ggcrv1.Image, error) { return imagebuild.BusyboxImage(in.Busybox) },
		},
		{
			Names:      []string{"registry.k8s.io/pause:3.10.2"},
			From:       "cmd/berth-pause (internal/imagebuild)",
			Substitute: "berth's own pause program, which does what upstream's does (sleep, reap, exit on SIGTERM/SIGINT)",
			build:      func(in ImageInputs) (ggcrv1.Image, error) { return imagebuild.PauseImage(in.Pause) },
		},
		{
			Names:      []string{e2eRegistry + "nginx:1.15-4", e2eRegistry + "nginx:1.27-0"},
			From:       "the busybox image running `httpd -f -p 80`",
			Substitute: "busybox httpd on port 80 stands in for nginx: the specs only need a long-running server with sh",
			build:      nginxImage,
		},
		{
			// Formerly jessie-dnsutils: the DNS specs' second querier.
			Names: []string{e2eRegistry + "glibc-dns-testing:2.0.0"},
			From:  "the busybox image with test/conformance/dig and getent",
			Substitute: "busybox's hostname and sh instead of Debian's glibc tools: the hostname-override specs run `hostname` and `hostname -f`; " +
				"dig and getent are the stand-ins agnhost has (Go's resolver, not glibc's)",
			build: dnsTestingImage,
		},
		{
			Names:      []string{e2eRegistry + "nonroot:1.5"},
			From:       "the busybox image with USER 1234",
			Substitute: "busybox userland instead of debian-base; the same USER 1234",
			build:      nonrootImage,
		},
		{
			// The image volume specs mount it (pull policy Always: from the
			// run's registry.k8s.io mirror).
			Names: []string{e2eRegistry + "kitten:1.8"},
			From:  "the agnhost image with kitten.jpg and data.json of test/images/kitten/html, as upstream's Dockerfile",
			Substitute: "on the agnhost substitute: busybox instead of alpine, so it has no /etc/os-release saying Alpine Linux, " +
				"which the image volume spec reads",
			build: kittenImage,
		},
		{
			Names:      []string{e2eRegistry + "nonewprivs:1.4"},
			From:       "k8s.io/kubernetes/test/images/nonewprivs (static, setuid root) on a busybox userland",
			Substitute: "busybox userland instead of alpine",
			build:      nonewprivsImage,
		},
		{
			// The DRA specs' driver pods: sh, sleep, mkdir, rm, mv and
			// base64 through exec, and /hostpathplugin's proxy mode.
			Names: []string{hostpathpluginImage},
			From:  "the busybox image with test/conformance/hostpathplugin at /hostpathplugin",
			Substitute: "only the proxy mode of upstream's CSI host path driver (--endpoint, --proxy-endpoint: " +
				"each unix socket client piped to the next connection on the TCP port), which is all the DRA specs run; " +
				"busybox instead of alpine",
			build: hostpathpluginImg,
		},
	}
}

// BuildImages writes each image as docker-archive tarballs into dir, one
// per name (berth imports every *.tar of its images dir with its tags).
// It returns the tarballs' paths.
func BuildImages(in ImageInputs, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	var files []string
	for _, im := range Images() {
		img, err := im.build(in)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.Names[0], err)
		}
		for _, name := range im.Names {
			f := filepath.Join(dir, tarballName(name))
			if err := imagebuild.WriteTarball(f, name, img); err != nil {
				return nil, fmt.Errorf("image %s: %w", name, err)
			}
			files = append(files, f)
		}
	}
	return files, nil
}

// tarballName is a file name for an image name: registry.k8s.io/pause:3.10.2
// becomes pause-3.10.2.tar.
func tarballName(name string) string {
	base := name[strings.LastIndex(name, "/")+1:]
	return strings.ReplaceAll(base, ":", "-") + ".tar"
}

// onBusybox is the busybox image with files added as a second layer (a file
// there replaces the busybox layer's of the same path) and cfg applied to
// its configuration.
func onBusybox(busybox string, files []imagebuild.File, cfg func(*ggcrv1.Config)) (ggcrv1.Image, error) {
	base, err := imagebuild.BusyboxImage(busybox)
	if err != nil {
		return nil, err
	}
	return onImage(base, files, cfg)
}

// onImage is base with files added as a layer of their own and cfg
// applied to its configuration.
func onImage(base ggcrv1.Image, files []imagebuild.File, cfg func(*ggcrv1.Config)) (ggcrv1.Image, error) {
	img := base
	if len(files) > 0 {
		top, err := imagebuild.Build(files, ggcrv1.Config{})
		if err != nil {
			return nil, err
		}
		layers, err := top.Layers()
		if err != nil {
			return nil, fmt.Errorf("layers: %w", err)
		}
		if img, err = mutate.AppendLayers(base, layers...); err != nil {
			return nil, fmt.Errorf("append layer: %w", err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	c := cf.Config
	cfg(&c)
	return mutate.Config(img, c)
}

// userFiles are /etc/passwd and /etc/group with busybox's root and nobody
// plus the extra lines given.
func userFiles(passwd, group string) []imagebuild.File {
	return []imagebuild.File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" + passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\n" + group)},
	}
}

// agnhostImage follows upstream's Dockerfile: /agnhost as the entrypoint
// with pause as its default command, /agnhost-2 linked to it for the
// entrypoint tests, /uploads for netexec, and user-defined-in-image (uid
// 1000) in group-defined-in-image (gid 50000) for the supplemental groups
// specs; the localhost.crt and .key netexec serves HTTPS with; a curl and a
// /bin/bash (ash), which the suite runs in agnhost containers (hooks,
// networking, probes); and the content of fake-registry-server, the private
// registry of the image-pull specs.
func agnhostImage(in ImageInputs) (ggcrv1.Image, error) {
	data, err := os.ReadFile(in.Programs.Agnhost)
	if err != nil {
		return nil, fmt.Errorf("agnhost: %w", err)
	}
	standIns, err := standInFiles(in.StandIns, true)
	if err != nil {
		return nil, fmt.Errorf("agnhost: %w", err)
	}
	noNc, err := busyboxWithoutNc(in.Busybox)
	if err != nil {
		return nil, fmt.Errorf("agnhost: %w", err)
	}
	pause, err := imagebuild.PauseImage(in.Pause)
	if err != nil {
		return nil, fmt.Errorf("agnhost: %w", err)
	}
	registryFiles, err := fakeRegistryFiles("pause", "testing", pause)
	if err != nil {
		return nil, fmt.Errorf("agnhost: %w", err)
	}
	var tls []imagebuild.File
	for _, f := range agnhostTLSFiles {
		pem, err := os.ReadFile(filepath.Join(in.Programs.AgnhostTLS, f))
		if err != nil {
			return nil, fmt.Errorf("agnhost: %w", err)
		}
		tls = append(tls, imagebuild.File{Path: "/" + f, Mode: 0o644, Data: pem})
	}
	files := append(userFiles(
		"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
		"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"),
		// Specs run `/bin/bash -c` scripts that ash runs as well.
		imagebuild.File{Path: "/bin/bash", Mode: 0o755, Data: []byte("#!/bin/sh\nexec /bin/sh \"$@\"\n")},
		imagebuild.File{Path: "/agnhost", Mode: 0o755, Data: data},
		imagebuild.File{Path: "/agnhost-2", Linkname: "agnhost"},
		imagebuild.File{Path: "/uploads", Dir: true},
		imagebuild.File{Path: "/home/user-defined-in-image", Dir: true},
	)
	files = append(files, tls...)
	files = append(files, standIns...)
	files = append(files, noNc...)
	files = append(files, registryFiles...)
	return onBusybox(in.Busybox, files, func(c *ggcrv1.Config) {
		c.Entrypoint = []string{"/agnhost"}
		c.Cmd = []string{"pause"}
		c.ExposedPorts = map[string]struct{}{"80/tcp": {}, "8080/tcp": {}, "8081/tcp": {}, "9376/tcp": {}, "5000/tcp": {}}
	})
}

// standInFiles are dig and getent in /usr/bin, and curl and nc too if
// all (/usr/bin comes before busybox's /bin in the images' PATH).
func standInFiles(s StandIns, all bool) ([]imagebuild.File, error) {
	progs := map[string]string{"dig": s.Dig, "getent": s.Getent}
	if all {
		progs["curl"], progs["nc"] = s.Curl, s.Nc
	}
	var files []imagebuild.File
	for _, name := range []string{"curl", "dig", "getent", "nc"} {
		src, ok := progs[name]
		if !ok {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, imagebuild.File{Path: "/usr/bin/" + name, Mode: 0o755, Data: data})
	}
	return files, nil
}

// busyboxWithoutNc is a busybox without its nc applet, which its sh would
// run instead of the nc stand-in, and /bin/nc made a link to the stand-in.
func busyboxWithoutNc(busybox string) ([]imagebuild.File, error) {
	data, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox: %w", err)
	}
	patched, err := hideApplet(data, "nc", "nd")
	if err != nil {
		return nil, err
	}
	return []imagebuild.File{
		{Path: "/bin/busybox", Mode: 0o755, Data: patched},
		{Path: "/bin/nc", Linkname: "../usr/bin/nc"},
	}, nil
}

// dnsTestingImage is the DNS specs' second querier: a shell, seq, dig and
// getent.
func dnsTestingImage(in ImageInputs) (ggcrv1.Image, error) {
	files, err := standInFiles(in.StandIns, false)
	if err != nil {
		return nil, fmt.Errorf("glibc-dns-testing: %w", err)
	}
	return onBusybox(in.Busybox, files, func(*ggcrv1.Config) {})
}

// nginxImage serves an index page on port 80 with busybox's httpd.
func nginxImage(in ImageInputs) (ggcrv1.Image, error) {
	files := []imagebuild.File{
		{Path: "/usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte("<html><body>berth's nginx stand-in</body></html>\n")},
	}
	return onBusybox(in.Busybox, files, func(c *ggcrv1.Config) {
		c.Cmd = []string{"httpd", "-f", "-p", "80", "-h", "/usr/share/nginx/html"}
		c.ExposedPorts = map[string]struct{}{"80/tcp": {}}
	})
}

// kittenImage is agnhost with the kitten files at its working directory
// (/), serving them with test-webserver, as upstream's Dockerfile has it.
func kittenImage(in ImageInputs) (ggcrv1.Image, error) {
	base, err := agnhostImage(in)
	if err != nil {
		return nil, fmt.Errorf("kitten: %w", err)
	}
	var files []imagebuild.File
	for _, f := range kittenFiles {
		data, err := os.ReadFile(filepath.Join(in.Programs.Kitten, f))
		if err != nil {
			return nil, fmt.Errorf("kitten: %w", err)
		}
		files = append(files, imagebuild.File{Path: "/" + f, Mode: 0o644, Data: data})
	}
	return onImage(base, files, func(c *ggcrv1.Config) { c.Cmd = []string{"test-webserver"} })
}

// nonrootImage runs as uid 1234 by default, as upstream's does.
func nonrootImage(in ImageInputs) (ggcrv1.Image, error) {
	return onBusybox(in.Busybox, nil, func(c *ggcrv1.Config) { c.User = "1234" })
}

// nonewprivsImage holds nnp setuid root: it prints its effective uid, which
// stays the caller's when no_new_privs is set.
func nonewprivsImage(in ImageInputs) (ggcrv1.Image, error) {
	data, err := os.ReadFile(in.Programs.Nonewprivs)
	if err != nil {
		return nil, fmt.Errorf("nonewprivs: %w", err)
	}
	files := []imagebuild.File{{Path: "/usr/local/bin/nnp", Mode: 0o4755, Data: data}}
	return onBusybox(in.Busybox, files, func(c *ggcrv1.Config) {
		c.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		c.Cmd = []string{"nnp"}
	})
}

// hostpathpluginImg holds the proxy-mode stand-in at /hostpathplugin, its
// entrypoint as upstream's (the DRA specs override it with sh).
func hostpathpluginImg(in ImageInputs) (ggcrv1.Image, error) {
	data, err := os.ReadFile(in.StandIns.Hostpathplugin)
	if err != nil {
		return nil, fmt.Errorf("hostpathplugin: %w", err)
	}
	files := []imagebuild.File{{Path: "/hostpathplugin", Mode: 0o755, Data: data}}
	return onBusybox(in.Busybox, files, func(c *ggcrv1.Config) { c.Entrypoint = []string{"/hostpathplugin"} })
}
