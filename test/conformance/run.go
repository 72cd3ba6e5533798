package conformance

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// RunConfig is what every pass of e2e.test shares.
type RunConfig struct {
	E2ETest    string
	Ginkgo     string // the ginkgo CLI, for Procs > 1
	Kubeconfig string
	Kubectl    string
	OutDir     string        // each pass writes under OutDir/<pass name>
	Timeout    time.Duration // ginkgo's --timeout of each pass
	Procs      int           // specs run at once (ginkgo -p); Serial passes run one at a time
	Log        io.Writer     // e2e.test's output, besides OutDir/<pass>/e2e.log
	// DryRun lists the selected specs (as passed) without running them.
	DryRun bool
}

// interruptGrace is how long e2e.test gets after SIGINT to clean up its
// namespaces and write its report before it is killed (a variable for
// the test of the kill).
var interruptGrace = 90 * time.Second

// Command is the program and arguments that run pass p, writing into dir:
// e2e.test itself, or the ginkgo CLI running it on Procs processes.
func (c RunConfig) Command(p Pass, dir string) (string, []string) {
	suite := []string{
		"--provider=local",
		"--report-dir=" + dir,
		"--report-prefix=" + p.Name + "_",
		"--e2e-output-dir=" + dir,
		"--disable-log-dump",
		"--minStartupPods=0",
		"--allowed-not-ready-nodes=0",
	}
	if c.Kubeconfig != "" {
		suite = append(suite, "--kubeconfig="+c.Kubeconfig, "--kubectl-path="+c.Kubectl)
	}
	g := []string{"no-color", "timeout=" + c.Timeout.String(), "poll-progress-after=5m"}
	if c.DryRun {
		g = append(g, "dry-run")
	}
	if p.LabelFilter != "" {
		g = append(g, "label-filter="+p.LabelFilter)
	}
	for _, f := range p.Focus {
		g = append(g, "focus="+f)
	}
	for _, s := range p.Skip {
		g = append(g, "skip="+s)
	}
	if c.Procs > 1 && !p.Serial && c.Ginkgo != "" {
		args := []string{"--procs=" + strconv.Itoa(c.Procs)}
		for _, f := range g {
			args = append(args, "--"+f)
		}
		return c.Ginkgo, append(append(args, c.E2ETest, "--"), suite...)
	}
	for _, f := range g {
		suite = append(suite, "--ginkgo."+f)
	}
	return c.E2ETest, suite
}

// RunPass runs e2e.test for p and reads its JUnit report. A failing spec
// is no error (e2e.test exits 1): the result holds it. An error means no
// report could be read. On ctx's end e2e.test gets SIGINT, then SIGKILL
// after interruptGrace, and whatever report it wrote is still read.
func RunPass(ctx context.Context, c RunConfig, p Pass) (PassResult, error) {
	dir := filepath.Join(c.OutDir, p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return PassResult{}, fmt.Errorf("pass %s: %w", p.Name, err)
	}
	logFile, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		return PassResult{}, fmt.Errorf("pass %s: %w", p.Name, err)
	}
	defer logFile.Close()
	out := io.Writer(logFile)
	if c.Log != nil {
		out = io.MultiWriter(logFile, c.Log)
	}
	bin, args := c.Command(p, dir)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a terminal's Ctrl-C reaches it once,
	// from us, and ginkgo gets to clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = interruptGrace
	start := time.Now()
	runErr := cmd.Run()
	// WaitDelay's SIGKILL reaches ginkgo only: its e2e.test processes, in
	// its group, would outlive it, and go on running specs against a
	// cluster being stopped. Once all is done the group is empty (ESRCH).
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res, err := ReadJUnit(filepath.Join(dir, "junit_"+p.Name+"_01.xml"))
	res.Pass, res.Duration, res.Dir = p.Name, time.Since(start), dir
	if err != nil {
		return res, fmt.Errorf("pass %s: e2e.test: %v; no report: %w", p.Name, runErr, err)
	}
	if runErr != nil && res.Failed() == 0 {
		res.SuiteError = fmt.Sprintf("e2e.test: %v (see %s)", runErr, logFile.Name())
	}
	return res, nil
}
