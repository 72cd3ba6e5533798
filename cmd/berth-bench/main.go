// Command berth-bench measures berth against the runtime's own floor on
// this machine: start-up, reaction, steady-state cost, density and the
// decision cores. It prints a table and writes a JSON report; see
// BENCHMARKS.md.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/bench"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "berth-bench:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var (
		opts    bench.Options
		binDir  string
		out     string
		steady  []int
		density []int
	)
	cmd := &cobra.Command{
		Use:   "berth-bench",
		Short: "Measure berth against the container runtime's own floor",
		Long: `berth-bench runs berth on its own managed containerd (own root dir, ports,
pod network and cgroup root, all removed afterwards) and measures:

  start-up    N pods dropped into the manifest directory at once, on the host
              network and on the bridge: time to Running and to Ready, next to
              the same pods made by direct CRI calls (the floor)
  reaction    a container's process killed: time to its replacement started
  steady      pods with an http readiness and an exec liveness probe each
              second: CPU and memory of berth, containerd and the shims
  density     many pause-like pods: time to all Running, relist and sync
              latency, how fresh their status stays, what berth costs
  decisions   the Go benchmarks of the pure decision cores

Run as root, from the repository (for the decision benchmarks).`,
		Example: `  make bench
  berth-bench --pods 10 --reaction-kills 5 --steady-pods 20 --steady-window 10s --density-pods 50`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("run as root: berth runs containers")
			}
			if binDir == "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				binDir = filepath.Dir(self)
			}
			opts.Node.BinDir = binDir
			opts.SteadyPods, opts.DensityPods = positive(steady), positive(density)
			opts.Node.MaxPods = slices.Max(append(slices.Concat(steady, density), opts.StartupPods, opts.ReactionKills, 110)) + 10
			opts.BerthVersion = berthVersion(binDir)
			opts.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			r, err := bench.Run(ctx, opts)
			if r != nil && out != "" {
				if werr := writeJSON(out, r); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout())
			if err := bench.WriteTable(cmd.OutOrStdout(), r); err != nil {
				return err
			}
			if out != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "\nreport: %s\n", out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&binDir, "bin", "", "directory of the berth and berth-pause binaries (default: this program's)")
	f.StringVar(&opts.Node.Busybox, "busybox", "/bin/busybox", "static busybox binary, packaged as the workload image")
	f.StringVar(&out, "out", "bench.json", "JSON report file; empty for none")
	f.IntVar(&opts.StartupPods, "pods", 50, "pods per start-up round (host network, then bridge); 0 skips start-up")
	f.IntVar(&opts.ReactionKills, "reaction-kills", 20, "containers killed, one per pod; 0 skips reaction")
	f.IntSliceVar(&steady, "steady-pods", []int{100, 250}, "pod counts of the steady-state rounds; 0 skips them")
	f.DurationVar(&opts.SteadyWindow, "steady-window", time.Minute, "how long each steady-state round is measured")
	f.IntSliceVar(&density, "density-pods", []int{250, 500}, "pod counts of the density rounds; 0 skips them")
	f.DurationVar(&opts.DensityWindow, "density-window", 30*time.Second, "how long each density round is measured")
	f.BoolVar(&opts.DensityHostNet, "density-host-network", false, "density pods on the host network rather than the bridge")
	f.BoolVar(&opts.Decisions, "decisions", true, "run the decision benchmarks (needs the go tool and the source)")
	f.StringVar(&opts.SourceDir, "source", ".", "the berth repository, for the decision benchmarks")
	f.StringVar(&opts.DecisionBenchtime, "decision-benchtime", "1s", "go test -benchtime of each decision benchmark")
	f.StringArrayVar(&opts.Node.ExtraArgs, "berth-arg", nil, "an argument for `berth run` (repeatable), e.g. --berth-arg=--log-level=debug")
	f.StringVar(&opts.Node.KeepLog, "berth-log", "", "keep berth's log in this file (the node's root dir is removed)")
	f.StringVar(&opts.ProfileDir, "profile-dir", "", "write berth's CPU profile of each steady-state window here")
	return cmd
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

func writeJSON(path string, r *bench.Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
