package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Options choose the scenarios and their sizes. A zero size skips its
// scenario.
type Options struct {
	Node NodeOptions
	// IdleWindow is how long a node without pods is measured.
	IdleWindow     time.Duration
	StartupPods    int
	ReactionKills  int
	SteadyPods     []int
	SteadyWindow   time.Duration
	DensityPods    []int
	DensityWindow  time.Duration
	DensityHostNet bool
	// Decisions runs the decision benchmarks with the go tool in
	// SourceDir, each for DecisionBenchtime (go test's -benchtime).
	Decisions         bool
	SourceDir         string
	DecisionBenchtime string
	ProfileDir        string // where berth's profiles (CPU of start-up and steady state, heap) go; "" for none
	BerthVersion      string
	// Compare, with a kubelet binary, runs each scenario on berth, the
	// upstream kubelet and berth on an external containerd.
	Compare CompareOptions
	Log     *slog.Logger
}

// Run runs the scenarios in the order of the issue and returns the report:
// on one berth, or with opts.Compare on a fresh node of each agent per run
// (runCompare). The nodes are removed whatever happens.
func Run(ctx context.Context, opts Options) (r *Report, err error) {
	log := opts.Log
	r = &Report{
		Schema:    SchemaVersion,
		StartedAt: time.Now().UTC().Truncate(time.Second),
		Options: ReportOptions{
			IdleSeconds: opts.IdleWindow.Seconds(),
			StartupPods: opts.StartupPods, ReactionKills: opts.ReactionKills,
			SteadyPods: nonNil(opts.SteadyPods), SteadySeconds: opts.SteadyWindow.Seconds(),
			DensityPods: nonNil(opts.DensityPods), DensitySeconds: opts.DensityWindow.Seconds(),
			CompareRuns: opts.Compare.Runs,
		},
		Idle: []IdleResult{}, Startup: []StartupResult{}, Reaction: []ReactionResult{}, Steady: []SteadyResult{},
		Density: []DensityResult{}, Decisions: []Decision{}, Targets: []Target{}, Comparison: []ComparedFigure{},
	}
	if opts.ProfileDir != "" {
		// Made now rather than found missing when the first profile is
		// written, many minutes into the run.
		if err := os.MkdirAll(opts.ProfileDir, 0o755); err != nil {
			return r, fmt.Errorf("profile dir: %w", err)
		}
	}
	if opts.Decisions {
		log.Info("decisions: go test -bench", "benchtime", opts.DecisionBenchtime)
		if r.Decisions, err = runDecisions(ctx, opts.SourceDir, opts.DecisionBenchtime); err != nil {
			return r, err
		}
	}
	if opts.Compare.Kubelet != "" {
		if opts.Compare.Runs < 1 {
			return r, fmt.Errorf("compare runs: %d, want at least 1", opts.Compare.Runs)
		}
		err = runCompare(ctx, opts, r)
		r.Machine = describeMachine(r.Machine.Runtime, opts.BerthVersion)
	} else {
		err = runOnOneNode(ctx, opts, r)
	}
	// On a failure too: what was measured before it is reported.
	r.Targets = EvaluateTargets(r)
	return r, err
}

// runOnOneNode runs every scenario on one berth.
func runOnOneNode(ctx context.Context, opts Options, r *Report) (err error) {
	n, err := startNode(ctx, opts.Node)
	if err != nil {
		return err
	}
	defer func() {
		if closeErr := n.close(); closeErr != nil && err == nil {
			err = fmt.Errorf("clean up the node: %w", closeErr)
		}
	}()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\nberth's log (tail):\n%s", err, n.logTail())
		}
	}()
	version, err := n.cri.Version(ctx)
	if err != nil {
		return err
	}
	r.Machine = describeMachine(version.RuntimeName+" "+version.RuntimeVersion, opts.BerthVersion)
	for _, sc := range scenarios(opts) {
		if err := sc.run(ctx, n, r); err != nil {
			return err
		}
	}
	return nil
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
