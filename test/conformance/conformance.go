package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/berth-dev/berth/test/cluster"
)

// Config is one conformance run.
type Config struct {
	BerthBin  string // directory of berth and berth-pause
	Busybox   string // static busybox for the images
	OutDir    string // the run writes into OutDir/runs/<time>, linked as OutDir/latest
	Selection Selection
	Timeout   time.Duration // --ginkgo.timeout of each pass
	Procs     int           // specs run at once outside the Serial passes; 1 if zero
	Nodes     int           // berth nodes; 2 if zero
	// NoAddons leaves kube-proxy and CoreDNS out (and the nodes without
	// cluster DNS): for selections that need no Service, as TestSmoke's.
	NoAddons bool
	// Containerd is the directory of the containerd (with its shim and
	// runc) the nodes manage; "" for the host's, from PATH.
	Containerd string
	Log        io.Writer // progress and e2e.test's output
}

// Run builds what is missing (the control plane, the suite, the images),
// starts the control plane and the nodes, runs the passes of c.Selection
// and removes everything again, also when ctx ends (Ctrl-C): what ran by
// then is in the summary. The summary is written into the run's directory;
// an error means the run could not start or its report is missing.
func Run(ctx context.Context, c Config) (Summary, error) {
	if c.Log == nil {
		c.Log = io.Discard
	}
	s := Summary{Started: time.Now(), Commit: commit(ctx), Machine: machine(), Runtime: runtimeName(c.Containerd)}
	runDir := filepath.Join(c.OutDir, "runs", s.Started.UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return s, fmt.Errorf("run dir: %w", err)
	}
	linkLatest(c.OutDir, runDir)
	env, rc, err := prepare(ctx, c, runDir)
	if err != nil {
		return s, err
	}
	for _, p := range c.Selection.Passes() {
		if ctx.Err() != nil {
			s.Error = "interrupted before pass " + p.Name
			break
		}
		fmt.Fprintf(c.Log, "conformance: pass %s: label filter %q focus %q skip %q serial %v\n", p.Name, p.LabelFilter, p.Focus, p.Skip, p.Serial)
		res, err := runPass(ctx, env, rc, p)
		s.Passes = append(s.Passes, res)
		if err != nil {
			s.Error = err.Error()
			break
		}
		fmt.Fprintf(c.Log, "conformance: pass %s: %d passed, %d failed, %d skipped in %v\n",
			p.Name, res.Passed(), res.Failed(), res.Skipped(), res.Duration.Round(time.Second))
	}
	if ctx.Err() != nil && s.Error == "" {
		s.Error = "interrupted: " + ctx.Err().Error()
	}
	s.Duration = time.Since(s.Started)
	var errs []error
	if err := env.SaveLogs(filepath.Join(runDir, "logs")); err != nil {
		errs = append(errs, fmt.Errorf("save logs: %w", err))
	}
	if err := env.Stop(); err != nil {
		errs = append(errs, err)
	}
	if err := s.Write(runDir); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// runPass runs p, with the first node alone schedulable if p asks for it.
func runPass(ctx context.Context, env *Env, rc RunConfig, p Pass) (PassResult, error) {
	if !p.OneNode {
		return RunPass(ctx, rc, p)
	}
	uncordon, err := env.OnlyFirstNode(ctx)
	if err != nil {
		return PassResult{Pass: p.Name}, err
	}
	res, err := RunPass(ctx, rc, p)
	// The next pass needs every node, also after an interrupted one.
	return res, errors.Join(err, uncordon(context.WithoutCancel(ctx)))
}

// prepare builds or finds every binary, writes the images and starts the
// cluster.
func prepare(ctx context.Context, c Config, runDir string) (*Env, RunConfig, error) {
	buildCtx, cancel := context.WithTimeout(ctx, 60*time.Minute)
	defer cancel()
	bins, err := cluster.Build(buildCtx, c.Log)
	if err != nil {
		return nil, RunConfig{}, fmt.Errorf("build the control plane: %w", err)
	}
	progs, err := BuildPrograms(buildCtx, c.Log)
	if err != nil {
		return nil, RunConfig{}, fmt.Errorf("build the e2e suite: %w", err)
	}
	var addons *cluster.Addons
	if !c.NoAddons {
		a, err := cluster.BuildAddons(buildCtx, c.Log)
		if err != nil {
			return nil, RunConfig{}, fmt.Errorf("build kube-proxy and CoreDNS: %w", err)
		}
		addons = &a
	}
	imgDir := filepath.Join(runDir, "images")
	// The nodes hold their own links to the tarballs; the run keeps no copy.
	defer os.RemoveAll(imgDir)
	standIns, err := BuildStandIns(buildCtx, imgDir, c.Log)
	if err != nil {
		return nil, RunConfig{}, fmt.Errorf("build the stand-ins: %w", err)
	}
	in := ImageInputs{Programs: progs, Pause: filepath.Join(c.BerthBin, "berth-pause"), Busybox: c.Busybox, StandIns: standIns}
	images, err := BuildImages(in, imgDir)
	if err != nil {
		return nil, RunConfig{}, fmt.Errorf("build the images: %w", err)
	}
	startCtx, cancelStart := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelStart()
	env, err := StartEnv(startCtx, EnvConfig{Cluster: bins, Addons: addons, BerthBin: c.BerthBin, Containerd: c.Containerd, Images: images, Nodes: c.Nodes, Log: c.Log})
	if err != nil {
		return nil, RunConfig{}, err
	}
	rc := RunConfig{
		E2ETest:    progs.E2ETest,
		Ginkgo:     progs.Ginkgo,
		Procs:      c.Procs,
		Kubeconfig: env.Kubeconfig(),
		Kubectl:    env.Kubectl(),
		OutDir:     runDir,
		Timeout:    c.Timeout,
		Log:        c.Log,
	}
	return env, rc, nil
}

// linkLatest points dir/latest at the run's directory.
func linkLatest(dir, runDir string) {
	latest := filepath.Join(dir, "latest")
	tmp := latest + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(filepath.Join("runs", filepath.Base(runDir)), tmp); err == nil {
		_ = os.Rename(tmp, latest) // best effort: the run's own dir is what counts
	}
}

// commit names the checkout: git describe --always --dirty.
func commit(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	repo, err := RepoRoot()
	if err != nil {
		return "unknown"
	}
	cmd := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// machine describes the host: CPUs, memory and kernel.
func machine() string {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s: %d CPUs, %s, linux %s", host, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)))
}

// runtimeName says which containerd the nodes manage, for the summary.
func runtimeName(dir string) string {
	if dir == "" {
		return "the host's containerd (PATH)"
	}
	return "the containerd of " + dir
}
