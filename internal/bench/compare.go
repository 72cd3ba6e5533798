package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// CompareOptions say how to compare berth with the upstream kubelet.
type CompareOptions struct {
	// Kubelet is the kubelet binary; "" runs no comparison.
	Kubelet string
	// Runs is how many times each agent runs each scenario, interleaved.
	Runs int
	// KubeletLog, when set, receives the log of the last kubelet run.
	KubeletLog string
}

// scenario is one of the harness's scenarios at one size, runnable on any
// agent; its results go into the lists of a Report.
type scenario struct {
	name string
	run  func(ctx context.Context, n nodeUnderTest, into *Report) error
}

// scenarios are the runs opts ask for, in the order.
func scenarios(opts Options) []scenario {
	var out []scenario
	// Idle first: on one node, before any pod has come and gone.
	if opts.IdleWindow > 0 {
		out = append(out, scenario{"idle", func(ctx context.Context, n nodeUnderTest, r *Report) error {
			opts.Log.Info("idle", "agent", n.agent(), "window", opts.IdleWindow)
			i, err := runIdle(ctx, n, opts.IdleWindow)
			if err != nil {
				return fmt.Errorf("idle: %w", err)
			}
			r.Idle = append(r.Idle, i)
			return nil
		}})
	}
	// Host and bridge apart: in a comparison each has a fresh node, so
	// that the bridge round's pods are not the host round's names come
	// again (the kubelet held such a pod back for about 10 s).
	for _, host := range []bool{true, false} {
		if opts.StartupPods <= 0 {
			break
		}
		out = append(out, scenario{fmt.Sprintf("start-up, %d pods, %s", opts.StartupPods, networkName(host)), func(ctx context.Context, n nodeUnderTest, r *Report) error {
			opts.Log.Info("start-up", "agent", n.agent(), "pods", opts.StartupPods, "network", networkName(host))
			s, err := runStartup(ctx, n, opts.StartupPods, host, opts.ProfileDir)
			if err != nil {
				return fmt.Errorf("start-up, %s network: %w", networkName(host), err)
			}
			r.Startup = append(r.Startup, s)
			return nil
		}})
	}
	if opts.ReactionKills > 0 {
		out = append(out, scenario{fmt.Sprintf("reaction, %d kills", opts.ReactionKills), func(ctx context.Context, n nodeUnderTest, r *Report) error {
			opts.Log.Info("reaction", "agent", n.agent(), "kills", opts.ReactionKills)
			re, err := runReaction(ctx, n, opts.ReactionKills)
			if err != nil {
				return fmt.Errorf("reaction: %w", err)
			}
			r.Reaction = append(r.Reaction, re)
			return nil
		}})
	}
	for _, pods := range opts.SteadyPods {
		out = append(out, scenario{fmt.Sprintf("steady state, %d pods", pods), func(ctx context.Context, n nodeUnderTest, r *Report) error {
			opts.Log.Info("steady state", "agent", n.agent(), "pods", pods, "window", opts.SteadyWindow)
			s, err := runSteady(ctx, n, pods, opts.SteadyWindow, opts.ProfileDir)
			if err != nil {
				return fmt.Errorf("steady state, %d pods: %w", pods, err)
			}
			r.Steady = append(r.Steady, s)
			return nil
		}})
	}
	for _, pods := range opts.DensityPods {
		out = append(out, scenario{fmt.Sprintf("density, %d pods", pods), func(ctx context.Context, n nodeUnderTest, r *Report) error {
			opts.Log.Info("density", "agent", n.agent(), "pods", pods, "network", networkName(opts.DensityHostNet), "window", opts.DensityWindow)
			d, err := runDensity(ctx, n, pods, opts.DensityHostNet, opts.DensityWindow, opts.ProfileDir)
			if err != nil {
				return fmt.Errorf("density, %d pods: %w", pods, err)
			}
			r.Density = append(r.Density, d)
			return nil
		}})
	}
	return out
}

// agentStarter starts a fresh node of one agent.
type agentStarter struct {
	name  string
	start func(ctx context.Context) (nodeUnderTest, error)
}

// compareAgents are berth on its managed containerd, the kubelet, and
// berth on a containerd the harness starts, in the table's order.
func compareAgents(opts Options) []agentStarter {
	kubelet := KubeletOptions{
		Kubelet: opts.Compare.Kubelet, BinDir: opts.Node.BinDir, Busybox: opts.Node.Busybox, MaxPods: opts.Node.MaxPods,
		KeepLog: opts.Compare.KubeletLog,
	}
	external := opts.Node
	external.ExternalRuntime = true
	return []agentStarter{
		{agentBerth, func(ctx context.Context) (nodeUnderTest, error) { return startNode(ctx, opts.Node) }},
		{agentKubelet, func(ctx context.Context) (nodeUnderTest, error) { return startKubeletNode(ctx, kubelet) }},
		{agentBerthExternal, func(ctx context.Context) (nodeUnderTest, error) { return startNode(ctx, external) }},
	}
}

// runCompare runs every scenario on every agent, opts.Compare.Runs times,
// interleaved (berth, the kubelet, berth external, then again), each run on
// a fresh node started for it and removed after it: no run inherits
// another's pods or agent state (the host's page cache aside). The
// first round's berth results fill r's own lists, as a run without
// comparison would; every run's figures go to r.Comparison, those of the
// runs done so far when one fails: an hour's measurements are not lost to
// the last scenario.
func runCompare(ctx context.Context, opts Options, r *Report) error {
	agents := compareAgents(opts)
	// berth's profiles come from its first round: one file per scenario.
	unprofiled := opts
	unprofiled.ProfileDir = ""
	plain := scenarios(unprofiled)
	var runs []agentFigures
	defer func() { r.Comparison = compareFigures(runs, agentNames(agents)) }()
	for i, profiled := range scenarios(opts) {
		for round := 1; round <= opts.Compare.Runs; round++ {
			for _, a := range agents {
				sc := plain[i]
				if round == 1 && a.name == agentBerth {
					sc = profiled
				}
				res, err := runOnFreshNode(ctx, a, sc, r)
				if err != nil {
					return fmt.Errorf("%s, round %d, %s: %w", sc.name, round, a.name, err)
				}
				if round == 1 && a.name == agentBerth {
					mergeResults(r, res)
				}
				runs = append(runs, agentFigures{agent: a.name, figures: figuresOf(res)})
			}
		}
	}
	return nil
}

func agentNames(agents []agentStarter) []string {
	var out []string
	for _, a := range agents {
		out = append(out, a.name)
	}
	return out
}

// runOnFreshNode starts a node of agent a, runs sc on it and removes it.
// The first berth node also names the runtime in r.Machine.
func runOnFreshNode(ctx context.Context, a agentStarter, sc scenario, r *Report) (res *Report, err error) {
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	n, err := a.start(startCtx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("start the node: %w", err)
	}
	defer func() {
		if closeErr := n.close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up the node: %w", closeErr))
		}
	}()
	if r.Machine.Runtime == "" && a.name == agentBerth {
		version, err := n.criService().Version(ctx)
		if err != nil {
			return nil, err
		}
		r.Machine.Runtime = version.RuntimeName + " " + version.RuntimeVersion
	}
	res = &Report{}
	if err := sc.run(ctx, n, res); err != nil {
		if t, ok := n.(interface{ logTail() string }); ok {
			err = fmt.Errorf("%w\n%s's log (tail):\n%s", err, n.agent(), t.logTail())
		}
		return nil, err
	}
	return res, nil
}

// mergeResults appends from's scenario results to r's.
func mergeResults(r, from *Report) {
	r.Idle = append(r.Idle, from.Idle...)
	r.Startup = append(r.Startup, from.Startup...)
	r.Reaction = append(r.Reaction, from.Reaction...)
	r.Steady = append(r.Steady, from.Steady...)
	r.Density = append(r.Density, from.Density...)
}

// agentFigures are the figures of one run of one agent.
type agentFigures struct {
	agent   string
	figures []figure
}

// figure is one number of a run, named by its scenario and what it is.
type figure struct {
	scenario, name, unit string
	value                float64
}

// ComparedFigure is one figure of one scenario for each agent that has it:
// an agent without it (berth's own metrics, for the kubelet) is absent.
type ComparedFigure struct {
	Scenario string        `json:"scenario"`
	Figure   string        `json:"figure"`
	Unit     string        `json:"unit"`
	Agents   []AgentFigure `json:"agents"`
	// BerthOverKubelet is berth's median over the kubelet's; absent where
	// either has no such figure or the kubelet's is zero.
	BerthOverKubelet *float64 `json:"berth_over_kubelet,omitempty"`
}

// AgentFigure is one agent's value of a figure: the median of its runs.
type AgentFigure struct {
	Agent  string    `json:"agent"`
	Median float64   `json:"median"`
	Runs   []float64 `json:"runs"`
}

// compareFigures groups the runs' figures by scenario and name, in the
// order they first appear, with each agent's runs in agents' order.
func compareFigures(runs []agentFigures, agents []string) []ComparedFigure {
	type key struct{ scenario, name string }
	var order []key
	byKey := map[key]*ComparedFigure{}
	values := map[key]map[string][]float64{}
	for _, run := range runs {
		for _, f := range run.figures {
			k := key{f.scenario, f.name}
			if byKey[k] == nil {
				order = append(order, k)
				byKey[k] = &ComparedFigure{Scenario: f.scenario, Figure: f.name, Unit: f.unit}
				values[k] = map[string][]float64{}
			}
			values[k][run.agent] = append(values[k][run.agent], f.value)
		}
	}
	out := []ComparedFigure{}
	for _, k := range order {
		c := byKey[k]
		for _, a := range agents {
			if vs, ok := values[k][a]; ok {
				c.Agents = append(c.Agents, AgentFigure{Agent: a, Median: median(vs), Runs: vs})
			}
		}
		c.BerthOverKubelet = ratioOfAgents(c.Agents, agentBerth, agentKubelet)
		out = append(out, *c)
	}
	return out
}

// ratioOfAgents is num's median over den's, nil where either is missing
// or den's is zero.
func ratioOfAgents(agents []AgentFigure, num, den string) *float64 {
	find := func(name string) (float64, bool) {
		i := slices.IndexFunc(agents, func(a AgentFigure) bool { return a.Agent == name })
		if i < 0 {
			return 0, false
		}
		return agents[i].Median, true
	}
	n, okN := find(num)
	d, okD := find(den)
	if !okN || !okD || d == 0 {
		return nil
	}
	ratio := round3(n / d)
	return &ratio
}

// median is the middle value, or the mean of the middle two.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return round3((s[mid-1] + s[mid]) / 2)
}
