// Command buildruntime builds containerd 2, its runc shim and runc from the
// Go module of runtime/containerd2 into <out>/containerd2-<hash of that
// module's go.mod and go.sum>/, unless they are already there, and prints
// that directory. The cache works like the test control plane's
// (test/cluster): a changed module gets a directory of its own, one build at
// a time holds the directory's lock, and binaries are renamed into place
// only once whole.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/buildcache"
)

// binary is one program of the module: its name and how it is built.
type binary struct {
	name, pkg string
	cgo       bool   // runc links libseccomp
	ldflags   string // version stamps
	tags      string
}

// binaries lists what the module builds. containerd and its shim need no
// cgo without the btrfs, devmapper and zfs snapshotters (berth uses
// overlayfs or native); runc needs cgo for seccomp.
func binaries(containerdVersion string) []binary {
	stamp := "-X github.com/containerd/containerd/v2/version.Version=" + containerdVersion
	const tags = "no_btrfs no_devmapper no_zfs"
	return []binary{
		{name: "containerd", pkg: "github.com/containerd/containerd/v2/cmd/containerd", ldflags: stamp, tags: tags},
		{name: "containerd-shim-runc-v2", pkg: "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", ldflags: stamp, tags: tags},
		{name: "runc", pkg: "github.com/opencontainers/runc", cgo: true, tags: "seccomp"},
	}
}

func main() {
	module := flag.String("module", "runtime/containerd2", "the Go module the binaries are built from")
	out := flag.String("out", "bin/runtime", "the cache's root directory")
	timeout := flag.Duration("timeout", 30*time.Minute, "how long the build may take")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	dir, err := ensure(ctx, *module, *out, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildruntime:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}

// ensure returns the cache directory of the module's binaries, building
// them first when one is missing.
func ensure(ctx context.Context, module, out string, log io.Writer) (string, error) {
	module, err := filepath.Abs(module)
	if err != nil {
		return "", err
	}
	key, err := buildcache.ModuleHash(module)
	if err != nil {
		return "", err
	}
	cache, err := filepath.Abs(filepath.Join(out, "containerd2-"+key))
	if err != nil {
		return "", err
	}
	if complete(cache) {
		return cache, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("create the binary cache: %w", err)
	}
	unlock, err := buildcache.Lock(ctx, cache, log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(cache) { // built by whoever held the lock
		return cache, nil
	}
	if err := build(ctx, module, cache, log); err != nil {
		return "", err
	}
	return cache, nil
}

func complete(cache string) bool {
	for _, b := range binaries("") {
		fi, err := os.Stat(filepath.Join(cache, b.name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// build compiles every binary into a temporary directory inside cache and
// then renames each into place. Called with the cache locked.
func build(ctx context.Context, module, cache string, log io.Writer) error {
	if old, err := filepath.Glob(filepath.Join(cache, ".build-*")); err == nil {
		for _, d := range old { // leftovers of killed builds
			os.RemoveAll(d)
		}
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	version, err := goCmd(ctx, module, nil, io.Discard, "list", "-m", "-f", "{{.Version}}", "github.com/containerd/containerd/v2")
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(log, "buildruntime: building containerd %s and runc into %s\n", version, cache)
	for _, b := range binaries(version) {
		cgo := "CGO_ENABLED=0"
		if b.cgo {
			cgo = "CGO_ENABLED=1"
		}
		args := []string{"build", "-trimpath", "-tags", b.tags, "-ldflags", b.ldflags, "-o", filepath.Join(tmp, b.name), b.pkg}
		if _, err := goCmd(ctx, module, []string{cgo}, log, args...); err != nil {
			return fmt.Errorf("build %s: %w", b.name, err)
		}
	}
	for _, b := range binaries(version) {
		if err := os.Rename(filepath.Join(tmp, b.name), filepath.Join(cache, b.name)); err != nil {
			return fmt.Errorf("install %s: %w", b.name, err)
		}
	}
	fmt.Fprintf(log, "buildruntime: built in %v\n", time.Since(start).Round(time.Second))
	return nil
}

// goCmd runs the go command in dir and returns its trimmed stdout; its
// stderr goes to log and, on failure, into the error.
func goCmd(ctx context.Context, dir string, env []string, log io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(log, &stderr)
	stdout, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(stdout)), nil
}
