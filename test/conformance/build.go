package conformance

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
	"github.com/berth-dev/berth/test/cluster"
)

// Upstream is the Kubernetes release whose suite and images are built: the
// version of k8s.io/kubernetes in tools/go.mod.
const Upstream = "v1.36.3"

// Programs are the upstream programs the conformance run needs, all built
// from tools/go.mod: the suite itself and the binaries of its test images.
type Programs struct {
	E2ETest    string // go test -c k8s.io/kubernetes/test/e2e
	Agnhost    string // k8s.io/kubernetes/test/images/agnhost, static
	Nonewprivs string // k8s.io/kubernetes/test/images/nonewprivs, static
	Ginkgo     string // the ginkgo CLI, which runs e2e.test's specs in parallel
	// AgnhostTLS holds localhost.crt and localhost.key, the pair upstream's
	// agnhost image carries at / (from agnhost's porter sources) for
	// netexec's HTTPS.
	AgnhostTLS string
	// Kitten holds data.json and kitten.jpg, the files upstream's kitten
	// image adds to agnhost's (test/images/kitten/html).
	Kitten string
	Dir    string // the cache directory holding them
}

// agnhostTLSFiles are the files of Programs.AgnhostTLS.
var agnhostTLSFiles = []string{"localhost.crt", "localhost.key"}

// kittenFiles are the files of Programs.Kitten, in its kitten directory.
var kittenFiles = []string{"data.json", "kitten.jpg"}

const kittenDir = "kitten"

// program is one binary of the cache: its file name and how it is built.
type program struct {
	name   string
	static bool                      // CGO_ENABLED=0: an image's binary, run without libc
	args   func(out string) []string // go command line writing to out
}

const (
	e2eName        = "e2e.test"
	agnhostName    = "agnhost"
	nonewprivsName = "nnp"
	ginkgoName     = "ginkgo"
)

func programs() []program {
	ld := cluster.VersionLDFlags(Upstream)
	return []program{
		{agnhostName, true, func(out string) []string {
			return []string{"build", "-o", out, "k8s.io/kubernetes/test/images/agnhost"}
		}},
		{nonewprivsName, true, func(out string) []string {
			return []string{"build", "-o", out, "k8s.io/kubernetes/test/images/nonewprivs"}
		}},
		{ginkgoName, false, func(out string) []string {
			return []string{"build", "-o", out, "github.com/onsi/ginkgo/v2/ginkgo"}
		}},
		// The suite runs on the host: built as the control plane is, so
		// that the two share the go build cache.
		{e2eName, false, func(out string) []string {
			return []string{"test", "-c", "-ldflags", ld, "-o", out, "k8s.io/kubernetes/test/e2e"}
		}},
	}
}

// ProgramsIn returns the programs of dir, or an error naming the first one
// missing or not executable.
func ProgramsIn(dir string) (Programs, error) {
	p := Programs{
		E2ETest:    filepath.Join(dir, e2eName),
		Agnhost:    filepath.Join(dir, agnhostName),
		Nonewprivs: filepath.Join(dir, nonewprivsName),
		Ginkgo:     filepath.Join(dir, ginkgoName),
		AgnhostTLS: dir,
		Kitten:     filepath.Join(dir, kittenDir),
		Dir:        dir,
	}
	for _, f := range []string{p.E2ETest, p.Agnhost, p.Nonewprivs, p.Ginkgo} {
		fi, err := os.Stat(f)
		if err != nil {
			return Programs{}, err
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return Programs{}, fmt.Errorf("%s is not an executable file", f)
		}
	}
	for _, f := range agnhostTLSFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return Programs{}, err
		}
	}
	for _, f := range kittenFiles {
		if _, err := os.Stat(filepath.Join(p.Kitten, f)); err != nil {
			return Programs{}, err
		}
	}
	return p, nil
}

// BuildPrograms returns the programs, building them first unless all are
// in the cache: $BERTH_CONFORMANCE_BIN if set, else
// <repo>/bin/conformance/programs/<hash of tools/go.mod, go.sum>. The first
// build takes about 15 minutes on 2 cores (the suite); later runs find the
// cache. Progress and the go command's output go to log (nil discards them).
func BuildPrograms(ctx context.Context, log io.Writer) (Programs, error) {
	if log == nil {
		log = io.Discard
	}
	cache := os.Getenv("BERTH_CONFORMANCE_BIN")
	if p, err := ProgramsIn(cache); cache != "" && err == nil {
		return p, nil
	}
	repo, err := RepoRoot()
	if err != nil {
		return Programs{}, err
	}
	tools := filepath.Join(repo, "test", "conformance", "tools")
	if cache == "" {
		key, err := buildcache.ModuleHash(tools)
		if err != nil {
			return Programs{}, err
		}
		cache = filepath.Join(repo, "bin", "conformance", "programs", key)
	}
	if p, err := ProgramsIn(cache); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Programs{}, fmt.Errorf("create the program cache: %w", err)
	}
	unlock, err := buildcache.Lock(ctx, cache, log)
	if err != nil {
		return Programs{}, err
	}
	defer unlock()
	for _, prog := range programs() {
		if err := buildOne(ctx, tools, cache, prog, log); err != nil {
			return Programs{}, err
		}
	}
	if err := copyModuleFiles(ctx, tools, cache); err != nil {
		return Programs{}, err
	}
	return ProgramsIn(cache)
}

// copyModuleFiles copies agnhost's porter/localhost.{crt,key} and the
// kitten image's files from the kubernetes module the tools module pins
// into cache.
func copyModuleFiles(ctx context.Context, tools, cache string) error {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = tools
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("find the kubernetes module's sources (go list -m): %w", err)
	}
	images := filepath.Join(strings.TrimSpace(string(out)), "test", "images")
	if err := copyFiles(filepath.Join(images, "agnhost", "porter"), cache, agnhostTLSFiles); err != nil {
		return fmt.Errorf("agnhost's TLS pair: %w", err)
	}
	if err := copyFiles(filepath.Join(images, "kitten", "html"), filepath.Join(cache, kittenDir), kittenFiles); err != nil {
		return fmt.Errorf("the kitten image's files: %w", err)
	}
	return nil
}

func copyFiles(from, to string, names []string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range names {
		data, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, f), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildOne builds prog into cache unless it is there, through a temporary
// name so that a killed build leaves no half-written binary.
func buildOne(ctx context.Context, tools, cache string, prog program, log io.Writer) error {
	final := filepath.Join(cache, prog.name)
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() {
		return nil
	}
	tmp := filepath.Join(cache, "."+prog.name+".tmp")
	os.Remove(tmp)
	start := time.Now()
	note := ""
	if prog.name == e2eName {
		note = " (about 15 minutes on 2 cores the first time)"
	}
	fmt.Fprintf(log, "conformance: building %s of kubernetes %s%s\n", prog.name, Upstream, note)
	if err := goRun(ctx, tools, prog.static, log, prog.args(tmp)...); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("install %s: %w", prog.name, err)
	}
	fmt.Fprintf(log, "conformance: built %s in %v\n", prog.name, time.Since(start).Round(time.Second))
	return nil
}

// RepoRoot is berth's repository: found from this file's path, or from the
// go command's main module when the path was trimmed.
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(dir, "test", "conformance", "tools", "go.mod")); err == nil {
			return filepath.Clean(dir), nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("find the repository: not inside a Go module")
	}
	dir := filepath.Dir(gomod)
	if _, err := os.Stat(filepath.Join(dir, "test", "conformance", "tools", "go.mod")); err != nil {
		return "", fmt.Errorf("find the conformance tools module: %w", err)
	}
	return dir, nil
}

// goRun runs the go command in the tools module (no go.work), its output
// to log, and fails with that output's end. A cancelled build takes its
// whole process group (compilers, linker) down.
func goRun(ctx context.Context, dir string, static bool, log io.Writer, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if static {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	cmd.Stdout = io.MultiWriter(log, &out)
	cmd.Stderr = io.MultiWriter(log, &out)
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
		return fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, lastBytes(out.Bytes(), 4000))
	}
	return nil
}

// lastBytes is the end of b, at most n bytes.
func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// StandIns are test/conformance's own programs, static, that the images
// carry in place of upstream's: curl, dig, getent, nc and hostpathplugin
// (its proxy mode only).
type StandIns struct{ Curl, Dig, Getent, Nc, Hostpathplugin string }

// BuildStandIns builds test/conformance/curl, dig, getent, nc and
// hostpathplugin, static, into dir.
func BuildStandIns(ctx context.Context, dir string, log io.Writer) (StandIns, error) {
	repo, err := RepoRoot()
	if err != nil {
		return StandIns{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var s StandIns
	for _, p := range []struct {
		name string
		out  *string
	}{{"curl", &s.Curl}, {"dig", &s.Dig}, {"getent", &s.Getent}, {"nc", &s.Nc}, {"hostpathplugin", &s.Hostpathplugin}} {
		*p.out = filepath.Join(dir, p.name)
		if err := goRun(ctx, repo, true, log, "build", "-o", *p.out, "./test/conformance/"+p.name); err != nil {
			return StandIns{}, err
		}
	}
	return s, nil
}
