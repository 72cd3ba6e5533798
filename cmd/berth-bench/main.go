// Command berth-bench measures berth against the runtime's own floor on
// this machine: start-up, reaction, steady-state cost, density and the
// decision cores. It prints a table and writes a JSON report; see
// BENCHMARKS.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-dev/berth/internal/bench"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "berth-bench:", err)
		os.Exit(1)
	}
}

// cli holds the command's flags.
type cli struct {
	opts    bench.Options
	binDir  string
	out     string
	steady  []int
	density []int
	compare string
	// report is an earlier run's JSON to print rather than run anew.
	report string
}

func newCommand() *cobra.Command {
	var c cli
	cmd := &cobra.Command{
		Use:   "berth-bench",
		Short: "Measure berth against the container runtime's own floor",
		Long: `berth-bench runs berth on its own managed containerd (own root dir, ports,
pod network and cgroup root, all removed afterwards) and measures:

  idle        no pods: what berth and containerd cost doing nothing
  start-up    N pods dropped into the manifest directory at once, on the host
              network and on the bridge: time to Running and to Ready, next to
              the same pods made by direct CRI calls (the floor)
  reaction    a container's process killed: time to its replacement started
  steady      pods with an http readiness and an exec liveness probe each
              second: CPU and memory of berth, containerd and the shims, the
              probes run and the CRI calls made, per second
  density     many pause-like pods: time to all Running, relist and sync
              latency, how fresh their status stays, what berth costs
  decisions   the Go benchmarks of the pure decision cores

With --compare kubelet, each of idle, start-up, reaction, steady state and density
runs --compare-runs times on each of three agents, interleaved, each run on a fresh node: berth on its
managed containerd, the upstream kubelet (--kubelet-bin, standalone with static
pods on a containerd the harness starts) and berth on such a containerd
(--container-runtime-endpoint). The table adds each figure's median per agent
and berth's over the kubelet's. Figures from berth's own metrics (relist, pod
sync, start-up phases) are berth's alone; CRI calls and probes come from the
series both agents serve, and the CRI calls the harness's containerd served
(kubelet, berth external) from that containerd's own metrics.

--report prints an earlier run's JSON as a table, its targets evaluated
anew (they follow the issues), and runs nothing.

Run as root, from the repository (for the decision benchmarks).`,
		Example: `  make bench
  make bench BENCH_COMPARE=kubelet
  berth-bench --pods 10 --reaction-kills 5 --steady-pods 20 --steady-window 10s --density-pods 50
  berth-bench --compare kubelet --kubelet-bin bin/cluster/kubelet-<hash>/kubelet --compare-runs 3
  berth-bench --report bin/bench.json`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	c.register(cmd.Flags())
	return cmd
}

func (c *cli) run(cmd *cobra.Command) error {
	if c.report != "" {
		return printReport(cmd.OutOrStdout(), c.report)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as root: berth runs containers")
	}
	if c.binDir == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		c.binDir = filepath.Dir(self)
	}
	c.opts.Node.BinDir = c.binDir
	if err := checkCompare(cmd.Context(), c.compare, c.opts.Node.ExternalRuntime, &c.opts.Compare); err != nil {
		return err
	}
	c.opts.SteadyPods, c.opts.DensityPods = positive(c.steady), positive(c.density)
	c.opts.Node.MaxPods = slices.Max(append(slices.Concat(c.steady, c.density), c.opts.StartupPods, c.opts.ReactionKills, 110)) + 10
	c.opts.BerthVersion = berthVersion(c.binDir)
	c.opts.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := bench.Run(ctx, c.opts)
	if r != nil && c.out != "" {
		if werr := writeJSON(c.out, r); werr != nil && err == nil {
			err = werr
		}
	}
	if r != nil {
		// After a failure, what was measured before it.
		fmt.Fprintln(cmd.OutOrStdout())
		if werr := bench.WriteTable(cmd.OutOrStdout(), r); werr != nil && err == nil {
			err = werr
		}
		if c.out != "" {
			fmt.Fprintf(cmd.OutOrStdout(), "\nreport: %s\n", c.out)
		}
	}
	return err
}

func (c *cli) register(f *pflag.FlagSet) {
	f.StringVar(&c.binDir, "bin", "", "directory of the berth and berth-pause binaries (default: this program's)")
	f.StringVar(&c.opts.Node.Busybox, "busybox", "/bin/busybox", "static busybox binary, packaged as the workload image")
	f.StringVar(&c.out, "out", "bench.json", "JSON report file; empty for none")
	f.DurationVar(&c.opts.IdleWindow, "idle-window", 30*time.Second, "how long a node without pods is measured; 0 skips idle")
	f.IntVar(&c.opts.StartupPods, "pods", 50, "pods per start-up round (host network, then bridge); 0 skips start-up")
	f.IntVar(&c.opts.ReactionKills, "reaction-kills", 20, "containers killed, one per pod; 0 skips reaction")
	f.IntSliceVar(&c.steady, "steady-pods", []int{100, 250}, "pod counts of the steady-state rounds; 0 skips them")
	f.DurationVar(&c.opts.SteadyWindow, "steady-window", time.Minute, "how long each steady-state round is measured")
	f.IntSliceVar(&c.density, "density-pods", []int{250, 500}, "pod counts of the density rounds; 0 skips them")
	f.DurationVar(&c.opts.DensityWindow, "density-window", 30*time.Second, "how long each density round is measured")
	f.BoolVar(&c.opts.DensityHostNet, "density-host-network", false, "density pods on the host network rather than the bridge")
	f.BoolVar(&c.opts.Decisions, "decisions", true, "run the decision benchmarks (needs the go tool and the source)")
	f.StringVar(&c.opts.SourceDir, "source", ".", "the berth repository, for the decision benchmarks")
	f.StringVar(&c.opts.DecisionBenchtime, "decision-benchtime", "1s", "go test -benchtime of each decision benchmark")
	f.BoolVar(&c.opts.Node.ExternalRuntime, "external-runtime", false, "run berth on a containerd the harness starts (--container-runtime-endpoint), as in clusters, rather than on its managed one")
	f.StringArrayVar(&c.opts.Node.ExtraArgs, "berth-arg", nil, "an argument for `berth run` (repeatable), e.g. --berth-arg=--log-level=debug")
	f.StringVar(&c.opts.Node.KeepLog, "berth-log", "", "keep berth's log in this file (the node's root dir is removed; with --compare, the last berth run's)")
	f.StringVar(&c.opts.ProfileDir, "profile-dir", "", "write berth's CPU profile of each start-up, steady-state and density window here")
	f.StringVar(&c.compare, "compare", "", `compare berth with another node agent: "kubelet" (the upstream kubelet, --kubelet-bin)`)
	f.IntVar(&c.opts.Compare.Runs, "compare-runs", 2, "with --compare, runs of each scenario per agent, interleaved")
	f.StringVar(&c.opts.Compare.KubeletLog, "kubelet-log", "", "with --compare, keep the last kubelet run's log in this file")
	f.StringVar(&c.report, "report", "", "print this earlier run's JSON report as a table, with its targets evaluated anew, and run nothing")
	f.StringVar(&c.opts.Compare.Kubelet, "kubelet-bin", "", "with --compare kubelet, the kubelet binary (make bench BENCH_COMPARE=kubelet builds v1.36.3)")
}

// checkCompare validates the comparison flags: a kubelet binary that is
// there and answers --version, and at least one run. Without --compare the
// kubelet binary is not used. A comparison runs berth on its managed
// containerd and on an external one, so it takes no --external-runtime.
func checkCompare(ctx context.Context, compare string, external bool, c *bench.CompareOptions) error {
	switch compare {
	case "":
		c.Kubelet = ""
		return nil
	case "kubelet":
		if external {
			return fmt.Errorf("--external-runtime with --compare: a comparison runs berth on its managed containerd and on an external one already")
		}
	default:
		return fmt.Errorf("--compare %q: the only agent to compare with is \"kubelet\"", compare)
	}
	if c.Runs < 1 {
		return fmt.Errorf("--compare-runs %d: want at least 1", c.Runs)
	}
	if c.Kubelet == "" {
		return fmt.Errorf("--compare kubelet needs --kubelet-bin, the kubelet binary (make bench BENCH_COMPARE=kubelet builds it)")
	}
	path, err := filepath.Abs(c.Kubelet)
	if err != nil {
		return fmt.Errorf("--kubelet-bin %q: %w", c.Kubelet, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("--kubelet-bin %s is not a usable kubelet: --version: %w: %s", path, err, bytes.TrimSpace(out))
	}
	if !bytes.HasPrefix(out, []byte("Kubernetes v")) {
		first, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
		return fmt.Errorf("--kubelet-bin %s is not a kubelet: --version says %q", path, first)
	}
	c.Kubelet = path
	return nil
}

// positive drops the zeros that stand for "skip".
func positive(counts []int) []int {
	return slices.DeleteFunc(counts, func(c int) bool { return c <= 0 })
}

// berthVersion asks the berth under test for its version.
func berthVersion(binDir string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "berth"), "version", "-o", "json").Output()
	if err != nil {
		return "unknown"
	}
	var v struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(out, &v) != nil || v.Version == "" {
		return "unknown"
	}
	return v.Version
}

// printReport prints the report in path, from an earlier run, with the
// targets of this version of the harness.
func printReport(w io.Writer, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r bench.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if r.Schema != bench.SchemaVersion {
		return fmt.Errorf("%s: report schema %d, this harness reads %d", path, r.Schema, bench.SchemaVersion)
	}
	r.Targets = bench.EvaluateTargets(&r)
	return bench.WriteTable(w, &r)
}

func writeJSON(path string, r *bench.Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
