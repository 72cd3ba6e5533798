package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/internal/buildcache"
)

// Binaries are the paths of the control-plane programs.
type Binaries struct {
	APIServer         string
	ControllerManager string
	Scheduler         string
	Kubectl           string
	Etcd              string
}

// tool is a package of tools/go.mod's tool directives and the name of the
// binary it is built to.
type tool struct{ name, pkg string }

// kubeTools are built together; etcd's main package is .../server/v3, so it
// is built on its own to get its name.
func kubeTools() []tool {
	return []tool{
		{"kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
		{"kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"},
		{"kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"},
		{"kubectl", "k8s.io/kubernetes/cmd/kubectl"},
	}
}

const etcdName, etcdPkg = "etcd", "go.etcd.io/etcd/server/v3"

// BinariesIn returns the binaries of dir, or an error naming the first one
// missing or not executable.
func BinariesIn(dir string) (Binaries, error) {
	b := Binaries{
		APIServer:         filepath.Join(dir, "kube-apiserver"),
		ControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Scheduler:         filepath.Join(dir, "kube-scheduler"),
		Kubectl:           filepath.Join(dir, "kubectl"),
		Etcd:              filepath.Join(dir, "etcd"),
	}
	for _, p := range []string{b.APIServer, b.ControllerManager, b.Scheduler, b.Kubectl, b.Etcd} {
		fi, err := os.Stat(p)
		if err != nil {
			return Binaries{}, err
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return Binaries{}, fmt.Errorf("%s is not an executable file", p)
		}
	}
	return b, nil
}

// Build returns the control-plane binaries, building them first unless all
// five are already in the cache: $BERTH_CLUSTER_BIN if set, else
// <repo>/bin/cluster/<hash of tools/go.mod and go.sum>. Progress and the go
// command's output go to log (nil discards them). The first build takes many
// minutes on a small machine; later ones find the cache.
func Build(ctx context.Context, log io.Writer) (Binaries, error) {
	if log == nil {
		log = io.Discard
	}
	cache := os.Getenv("BERTH_CLUSTER_BIN")
	if b, err := BinariesIn(cache); cache != "" && err == nil {
		return b, nil // prebuilt: no need for the sources
	}
	tools, err := toolsDir(ctx)
	if err != nil {
		return Binaries{}, err
	}
	if cache == "" {
		key, err := buildcache.ModuleHash(tools)
		if err != nil {
			return Binaries{}, err
		}
		cache = filepath.Join(tools, "..", "..", "..", "bin", "cluster", key)
	}
	cache, err = filepath.Abs(cache)
	if err != nil {
		return Binaries{}, err
	}
	if b, err := BinariesIn(cache); err == nil {
		return b, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("create the binary cache: %w", err)
	}
	// go test runs packages in parallel: one build at a time, and whoever
	// waited uses what the other built.
	unlock, err := buildcache.Lock(ctx, cache, log)
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if b, err := BinariesIn(cache); err == nil {
		return b, nil
	}
	if err := build(ctx, tools, cache, log); err != nil {
		return Binaries{}, err
	}
	return BinariesIn(cache)
}

// toolsDir finds test/cluster/tools from this file's own path, or from the
// main module when the path was trimmed away (-trimpath).
func toolsDir(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "tools")
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("find the repository: not inside a Go module")
	}
	dir := filepath.Join(filepath.Dir(gomod), "test", "cluster", "tools")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("find the control-plane tools module: %w", err)
	}
	return dir, nil
}

// build compiles the five binaries into a temporary directory inside cache
// and only then renames each into place, so a killed build leaves no
// half-written binary behind. Called with the cache locked.
func build(ctx context.Context, tools, cache string, log io.Writer) error {
	// Leftovers of killed builds: nobody else can be using them under the lock.
	if old, err := filepath.Glob(filepath.Join(cache, ".build-*")); err == nil {
		for _, d := range old {
			os.RemoveAll(d)
		}
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	version, err := goOutput(ctx, tools, log, "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(log, "cluster: building kubernetes %s and etcd into %s (many minutes the first time)\n", version, cache)
	ldflags := VersionLDFlags(version)
	args := []string{"build", "-ldflags", ldflags, "-o", tmp + "/"} // DIR/: each binary named after its package
	for _, t := range kubeTools() {
		args = append(args, t.pkg)
	}
	if _, err := goOutput(ctx, tools, log, args...); err != nil {
		return err
	}
	if _, err := goOutput(ctx, tools, log, "build", "-o", filepath.Join(tmp, etcdName), etcdPkg); err != nil {
		return err
	}
	for _, t := range append(kubeTools(), tool{etcdName, etcdPkg}) {
		if err := os.Rename(filepath.Join(tmp, t.name), filepath.Join(cache, t.name)); err != nil {
			return fmt.Errorf("install %s: %w", t.name, err)
		}
	}
	fmt.Fprintf(log, "cluster: built the control-plane binaries in %v\n", time.Since(start).Round(time.Second))
	return nil
}

// VersionLDFlags stamps binaries with their release, as Kubernetes' own
// build does, so that /version and kubectl version report it rather than
// v0.0.0-master.
func VersionLDFlags(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var flags []string
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		for _, kv := range [][2]string{{"gitVersion", version}, {"gitMajor", major}, {"gitMinor", minor}, {"gitTreeState", "clean"}} {
			flags = append(flags, fmt.Sprintf("-X %s.%s=%s", pkg, kv[0], kv[1]))
		}
	}
	return strings.Join(flags, " ")
}

// goOutput runs the go command in dir, copying its output to log, and fails
// with that output in the error.
func goOutput(ctx context.Context, dir string, log io.Writer, args ...string) (string, error) {
	var stdout, combined bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// The tools module stands alone: no go.work may pull berth's module in.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout = io.MultiWriter(&stdout, &combined)
	cmd.Stderr = io.MultiWriter(log, &combined)
	// go build's compilers and linker are its children: a cancelled build
	// takes its whole process group down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process.Pid <= 1 {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return "", fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, combined.Bytes())
	}
	return strings.TrimSpace(stdout.String()), nil
}
