package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Options choose the scenarios and their sizes. A zero size skips its
// scenario.
type Options struct {
	Node           NodeOptions
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
	Log               *slog.Logger
}

// Run runs the scenarios on one berth, in the order of the issue, and
// returns the report. The node is removed whatever happens.
func Run(ctx context.Context, opts Options) (r *Report, err error) {
	log := opts.Log
	r = &Report{
		Schema:    SchemaVersion,
		StartedAt: time.Now().UTC().Truncate(time.Second),
		Options: ReportOptions{
			StartupPods: opts.StartupPods, ReactionKills: opts.ReactionKills,
			SteadyPods: nonNil(opts.SteadyPods), SteadySeconds: opts.SteadyWindow.Seconds(),
			DensityPods: nonNil(opts.DensityPods), DensitySeconds: opts.DensityWindow.Seconds(),
		},
		Startup: []StartupResult{}, Reaction: []ReactionResult{}, Steady: []SteadyResult{},
		Density: []DensityResult{}, Decisions: []Decision{}, Targets: []Target{},
	}
	if opts.Decisions {
		log.Info("decisions: go test -bench", "benchtime", opts.DecisionBenchtime)
		if r.Decisions, err = runDecisions(ctx, opts.SourceDir, opts.DecisionBenchtime); err != nil {
			return r, err
		}
	}
	n, err := startNode(ctx, opts.Node)
	if err != nil {
		return r, err
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
		return r, err
	}
	r.Machine = describeMachine(version.RuntimeName+" "+version.RuntimeVersion, opts.BerthVersion)

	if opts.StartupPods > 0 {
		for _, host := range []bool{true, false} {
			log.Info("start-up", "pods", opts.StartupPods, "network", networkName(host))
			s, err := runStartup(ctx, n, opts.StartupPods, host, opts.ProfileDir)
			if err != nil {
				return r, fmt.Errorf("start-up, %s network: %w", networkName(host), err)
			}
			r.Startup = append(r.Startup, s)
		}
	}
	if opts.ReactionKills > 0 {
		log.Info("reaction", "kills", opts.ReactionKills)
		re, err := runReaction(ctx, n, opts.ReactionKills)
		if err != nil {
			return r, fmt.Errorf("reaction: %w", err)
		}
		r.Reaction = append(r.Reaction, re)
	}
	for _, pods := range opts.SteadyPods {
		log.Info("steady state", "pods", pods, "window", opts.SteadyWindow)
		s, err := runSteady(ctx, n, pods, opts.SteadyWindow, opts.ProfileDir)
		if err != nil {
			return r, fmt.Errorf("steady state, %d pods: %w", pods, err)
		}
		r.Steady = append(r.Steady, s)
	}
	for _, pods := range opts.DensityPods {
		log.Info("density", "pods", pods, "network", networkName(opts.DensityHostNet), "window", opts.DensityWindow)
		d, err := runDensity(ctx, n, pods, opts.DensityHostNet, opts.DensityWindow)
		if err != nil {
			return r, fmt.Errorf("density, %d pods: %w", pods, err)
		}
		r.Density = append(r.Density, d)
	}
	r.Targets = evaluateTargets(r)
	return r, nil
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
