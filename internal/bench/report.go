package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// SchemaVersion changes whenever a field of Report is renamed, removed or
// changes meaning, so that two reports compare only when they agree.
const SchemaVersion = 2

// Report is the harness's JSON. Every field is always present (a scenario
// that was not run is an empty list), so two runs compare field by field.
type Report struct {
	Schema    int              `json:"schema"`
	StartedAt time.Time        `json:"started_at"`
	Machine   Machine          `json:"machine"`
	Options   ReportOptions    `json:"options"`
	Idle      []IdleResult     `json:"idle"`
	Startup   []StartupResult  `json:"startup"`
	Reaction  []ReactionResult `json:"reaction"`
	Steady    []SteadyResult   `json:"steady"`
	Density   []DensityResult  `json:"density"`
	Decisions []Decision       `json:"decisions"`
	Targets   []Target         `json:"targets"`
	// Comparison is each scenario's figures on each agent (berth, the
	// kubelet, berth on an external containerd), from --compare; empty
	// without it.
	Comparison []ComparedFigure `json:"comparison"`
}

// Machine is where the figures come from.
type Machine struct {
	CPUModel      string  `json:"cpu_model"`
	CPUs          int     `json:"cpus"`
	MemoryGiB     float64 `json:"memory_gib"`
	Kernel        string  `json:"kernel"`
	CgroupVersion int     `json:"cgroup_version"`
	Runtime       string  `json:"runtime"` // the CRI runtime's name and version
	Go            string  `json:"go"`
	Berth         string  `json:"berth"` // berth version
}

// ReportOptions are the sizes the run used.
type ReportOptions struct {
	IdleSeconds    float64 `json:"idle_seconds"`
	StartupPods    int     `json:"startup_pods"`
	ReactionKills  int     `json:"reaction_kills"`
	SteadyPods     []int   `json:"steady_pods"`
	SteadySeconds  float64 `json:"steady_seconds"`
	DensityPods    []int   `json:"density_pods"`
	DensitySeconds float64 `json:"density_seconds"`
	CompareRuns    int     `json:"compare_runs"` // runs per agent and scenario; 0 without --compare
}

// Target is one of the targets against what was measured.
type Target struct {
	Name     string  `json:"name"`
	Limit    string  `json:"limit"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
}

// EvaluateTargets checks the targets against r: those of berth's
// own runs, then those against the kubelet where r has a comparison. A
// target whose scenario did not run at the size the target names is left
// out.
func EvaluateTargets(r *Report) []Target {
	ts := ownTargets(r)
	ts = append(ts, comparedTargets(r.Comparison)...)
	limits := map[string]float64{
		"BenchmarkChoosePreemptionVictims1000": 1e6,
		"BenchmarkImageGCChoice10000":          10e6,
		"BenchmarkCheckpointWrite1000":         5e6,
	}
	for _, d := range r.Decisions {
		if limit, ok := limits[d.Name]; ok {
			ts = append(ts, Target{Name: d.Name, Limit: fmt.Sprintf("< %g", limit/1e6), Measured: round3(d.NsPerOp / 1e6), Unit: "ms", Met: d.NsPerOp < limit})
		}
	}
	return ts
}

// reactionMargin is how much later than the floor berth may start a
// killed container's replacement (issue 25: the floor + 20 ms).
const reactionMargin = 20.0

// ownTargets are the targets of berth's own figures (its first round in a
// comparison).
func ownTargets(r *Report) []Target {
	var ts []Target
	for _, i := range r.Idle {
		ts = append(ts,
			Target{Name: "idle: berth CPU", Limit: "<= 0.002", Measured: i.Berth.Cores, Unit: "cores", Met: i.Berth.Cores <= 0.002},
			Target{Name: "idle: berth peak RSS", Limit: "<= 25", Measured: i.Berth.PeakRSS, Unit: "MiB", Met: i.Berth.PeakRSS > 0 && i.Berth.PeakRSS <= 25},
		)
	}
	for _, s := range r.Startup {
		ts = append(ts,
			Target{Name: fmt.Sprintf("start-up overhead p50, %d pods, %s", s.Pods, s.Network), Limit: "<= 1.10", Measured: s.Overhead.P50, Unit: "x floor", Met: s.Overhead.P50 > 0 && s.Overhead.P50 <= 1.10},
			Target{Name: fmt.Sprintf("start-up overhead p99, %d pods, %s", s.Pods, s.Network), Limit: "<= 1.10", Measured: s.Overhead.P99, Unit: "x floor", Met: s.Overhead.P99 > 0 && s.Overhead.P99 <= 1.10},
		)
	}
	for _, re := range r.Reaction {
		limit := round3(re.Floor.P50 + reactionMargin)
		ts = append(ts, Target{Name: "reaction p50, kill to replacement started (floor p50 + 20 ms)", Limit: fmt.Sprintf("<= %g", limit), Measured: re.Restart.P50, Unit: "ms", Met: re.Restart.N > 0 && re.Floor.N > 0 && re.Restart.P50 <= limit})
	}
	for _, s := range r.Steady {
		if s.Pods != 100 {
			continue
		}
		ts = append(ts,
			Target{Name: "steady state, 100 pods: berth CPU", Limit: "<= 0.03", Measured: s.Berth.Cores, Unit: "cores", Met: s.Berth.Cores <= 0.03},
			Target{Name: "steady state, 100 pods: berth peak RSS", Limit: "<= 40", Measured: s.Berth.PeakRSS, Unit: "MiB", Met: s.Berth.PeakRSS > 0 && s.Berth.PeakRSS <= 40},
		)
	}
	for _, d := range r.Density {
		if d.Pods != 500 {
			continue
		}
		ts = append(ts,
			Target{Name: "density, 500 pods: Running", Limit: "= 500", Measured: float64(d.Running), Unit: "pods", Met: d.Running == 500},
			Target{Name: "density, 500 pods: status freshness max", Limit: "<= 2000", Measured: d.StatusFreshness.Max, Unit: "ms", Met: d.StatusFreshness.N > 0 && d.StatusFreshness.Max <= 2000},
		)
		if d.DensityBerth != nil {
			ts = append(ts, Target{Name: "density, 500 pods: relist p99", Limit: "< 50", Measured: d.RelistP99Ms, Unit: "ms", Met: d.RelistP99Ms > 0 && d.RelistP99Ms < 50})
		}
	}
	return ts
}

// comparedTargets are the targets against the kubelet in the same run,
// on the medians of the comparison: every start-up percentile of both
// berths at or below the kubelet's, the runtime's steady-state CPU under
// berth no higher than under the kubelet, and berth's reaction on an
// external containerd within its floor + 20 ms, as on its own.
func comparedTargets(cs []ComparedFigure) []Target {
	var ts []Target
	for _, c := range cs {
		k, ok := agentMedian(c, agentKubelet)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(c.Scenario, "start-up") && strings.HasPrefix(c.Figure, "Running "):
			for _, a := range []string{agentBerth, agentBerthExternal} {
				if v, ok := agentMedian(c, a); ok {
					ts = append(ts, Target{Name: fmt.Sprintf("%s: %s, %s (the kubelet's at most)", c.Scenario, c.Figure, a), Limit: fmt.Sprintf("<= %.0f", k), Measured: math.Round(v), Unit: c.Unit, Met: v > 0 && v <= k})
				}
			}
		case strings.HasPrefix(c.Scenario, "steady state") && c.Figure == "containerd CPU":
			ts = append(ts, runtimeCPUTarget(cs, c.Scenario)...)
		}
	}
	for _, c := range cs {
		if !strings.HasPrefix(c.Scenario, "reaction") || c.Figure != "kill to replacement started p50" {
			continue
		}
		v, okV := agentMedian(c, agentBerthExternal)
		floor, okF := figureMedian(cs, c.Scenario, "CRI floor p50", agentBerthExternal)
		if okV && okF {
			limit := round3(floor + reactionMargin)
			ts = append(ts, Target{Name: "reaction p50, kill to replacement started, " + agentBerthExternal + " (floor p50 + 20 ms)", Limit: fmt.Sprintf("<= %g", limit), Measured: v, Unit: c.Unit, Met: v <= limit})
		}
	}
	return ts
}

// runtimeCPUTarget compares the runtime's steady-state CPU (containerd
// and the shims) under berth with that under the kubelet.
func runtimeCPUTarget(cs []ComparedFigure, scenario string) []Target {
	runtimeCPU := func(agent string) (float64, bool) {
		c, okC := figureMedian(cs, scenario, "containerd CPU", agent)
		s, okS := figureMedian(cs, scenario, "shims CPU", agent)
		return round4(c + s), okC && okS
	}
	k, okK := runtimeCPU(agentKubelet)
	b, okB := runtimeCPU(agentBerth)
	if !okK || !okB {
		return nil
	}
	return []Target{{Name: scenario + ": runtime CPU (containerd and shims) under berth (the kubelet's at most)", Limit: fmt.Sprintf("<= %g", k), Measured: b, Unit: "cores", Met: b <= k}}
}

// agentMedian is agent's median of c.
func agentMedian(c ComparedFigure, agent string) (float64, bool) {
	for _, a := range c.Agents {
		if a.Agent == agent {
			return a.Median, true
		}
	}
	return 0, false
}

// figureMedian is agent's median of the figure of scenario in cs.
func figureMedian(cs []ComparedFigure, scenario, figure, agent string) (float64, bool) {
	for _, c := range cs {
		if c.Scenario == scenario && c.Figure == figure {
			return agentMedian(c, agent)
		}
	}
	return 0, false
}

// describeMachine reads what the figures depend on.
func describeMachine(runtimeVersion, berthVersion string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Runtime: runtimeVersion, Berth: berthVersion, CgroupVersion: 1}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb uint64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGiB = float64(int64(float64(kb)/(1<<20)*10+0.5)) / 10
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		m.CgroupVersion = 2
	}
	return m
}

// WriteTable prints r for people: one section per scenario, then the
// targets.
func WriteTable(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	m := r.Machine
	p("machine\t%s, %d CPUs, %.1f GiB, kernel %s, cgroup v%d, %s, %s, berth %s\n\n", m.CPUModel, m.CPUs, m.MemoryGiB, m.Kernel, m.CgroupVersion, m.Runtime, m.Go, m.Berth)
	for _, i := range r.Idle {
		p("IDLE (no pods, %.0f s)\tcores\tpeak MiB\tfinal MiB\tpeak anon MiB\n", i.WindowSeconds)
		p("berth\t%.4f\t%.1f\t%.1f\t%.1f\n", i.Berth.Cores, i.Berth.PeakRSS, i.Berth.FinalRSS, i.Berth.PeakAnonRSS)
		p("containerd (+children)\t%.4f\t%.1f\t%.1f\t%.1f\n\n", i.Containerd.Cores, i.Containerd.PeakRSS, i.Containerd.FinalRSS, i.Containerd.PeakAnonRSS)
	}
	if len(r.Startup) > 0 {
		p("START-UP (ms from the drop)\tpods\tp50\tp90\tp99\tmax\n")
		for _, s := range r.Startup {
			p("%s: berth Running\t%d\t%.0f\t%.0f\t%.0f\t%.0f\n", s.Network, s.Pods, s.Running.P50, s.Running.P90, s.Running.P99, s.Running.Max)
			p("%s: CRI floor\t%d\t%.0f\t%.0f\t%.0f\t%.0f\n", s.Network, s.Pods, s.Floor.P50, s.Floor.P90, s.Floor.P99, s.Floor.Max)
			p("%s: berth / floor\t\t%.2f\t%.2f\t%.2f\t%.2f\n", s.Network, s.Overhead.P50, s.Overhead.P90, s.Overhead.P99, s.Overhead.Max)
			p("%s: berth Ready\t%d\t%.0f\t%.0f\t%.0f\t%.0f\n", s.Network, s.Pods, s.Ready.P50, s.Ready.P90, s.Ready.P99, s.Ready.Max)
			p("%s: CPU seconds\tberth %.2f, runtime for berth %.2f, runtime for the floor %.2f\n", s.Network, s.CPU.Berth, s.CPU.RuntimeBerth, s.CPU.RuntimeFloor)
			writeStartupMetrics(p, s)
		}
		p("\n")
	}
	for _, re := range r.Reaction {
		p("REACTION (ms, restartPolicy Always)\tkills\tp50\tp90\tp99\tmax\n")
		for _, l := range []struct {
			name string
			l    Latency
		}{{"kill to replacement started", re.Restart}, {"  kill to exit recorded", re.Exit}, {"  exit to replacement created", re.Decide}, {"  created to started", re.CreateAndStart}, {"floor: kill, then create and start at once", re.Floor}} {
			p("%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\n", l.name, re.Kills, l.l.P50, l.l.P90, l.l.P99, l.l.Max)
		}
		p("\n")
	}
	if len(r.Steady) > 0 {
		p("STEADY STATE\tpods\tprobes/s\tcores\tpeak MiB\tfinal MiB\tpeak anon MiB\tprocesses\n")
		for _, s := range r.Steady {
			probes := fmt.Sprintf("%.0f", s.ProbesPerSecond)
			p("pods %d: %d Running at the start, %s probes/s, %.1f failed/s, %d restarts, %d Ready at the end\n", s.Pods, s.RunningAtStart, probes, s.FailedProbesPerSecond, s.Restarts, s.ReadyAtEnd)
			if f := s.ExecFloor; f != nil {
				p("pods %d: the runtime alone ran %.1f execs/s at most (%d at once, %.0f ms of the machine's CPU each; one at a time p50 %.0f ms); the pods ask for %d exec probes/s\n",
					s.Pods, f.PerSecond, f.InFlight, f.MachineCPUMsPerExec, f.OneAtATime.P50, s.Pods)
			}
			p("pods %d: CRI calls/s\t%s\n", s.Pods, formatCalls(s.CRICallsPerSecond))
			if len(s.ServedCRICallsPerSecond) > 0 {
				p("pods %d: CRI calls/s containerd served\t%s\n", s.Pods, formatCalls(s.ServedCRICallsPerSecond))
			}
			for _, u := range []struct {
				name string
				u    Usage
			}{{"berth", s.Berth}, {"containerd (+children)", s.Containerd}, {"shims (+runc)", s.Shims}} {
				p("%s\t%d\t%s\t%.3f\t%.1f\t%.1f\t%.1f\t%d\n", u.name, s.Pods, probes, u.u.Cores, u.u.PeakRSS, u.u.FinalRSS, u.u.PeakAnonRSS, u.u.Processes)
			}
		}
		p("\n")
	}
	if len(r.Density) > 0 {
		p("DENSITY\tpods\tRunning\tall Running s\trelist mean/p99 ms\tsync mean/p99 ms\tfresh p50/max ms\tberth cores\tberth MiB\n")
		for _, d := range r.Density {
			relist, sync := absent, absent
			if d.DensityBerth != nil {
				relist, sync = fmt.Sprintf("%.1f / %.0f", d.RelistMeanMs, d.RelistP99Ms), fmt.Sprintf("%.1f / %.0f", d.PodSyncMeanMs, d.PodSyncP99Ms)
			}
			p("%s\t%d\t%d\t%.1f\t%s\t%s\t%.0f / %.0f\t%.3f\t%.1f\n", d.Network, d.Pods, d.Running, d.AllRunningSeconds,
				relist, sync, d.StatusFreshness.P50, d.StatusFreshness.Max, d.Berth.Cores, d.Berth.PeakRSS)
		}
		p("\n")
	}
	writeComparison(p, r)
	if len(r.Decisions) > 0 {
		p("DECISIONS\tms/op\tB/op\tallocs/op\n")
		for _, d := range r.Decisions {
			p("%s\t%.3f\t%.0f\t%.0f\n", d.Name, d.NsPerOp/1e6, d.BytesPerOp, d.AllocsPerOp)
		}
		p("\n")
	}
	if len(r.Targets) > 0 {
		p("TARGET\tlimit\tmeasured\t\n")
		for _, t := range r.Targets {
			verdict := "met"
			if !t.Met {
				verdict = "MISSED"
			}
			p("%s\t%s %s\t%g\t%s\n", t.Name, t.Limit, t.Unit, t.Measured, verdict)
		}
	}
	return tw.Flush()
}

// absent stands in the table for a figure an agent does not have.
const absent = "—"

// formatCalls lists CRI calls as "method count, ...".
func formatCalls(calls []CRICalls) string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = fmt.Sprintf("%s %.1f", c.Operation, c.Calls)
	}
	return strings.Join(out, ", ")
}

// writeStartupMetrics prints the start-up figures from the agent's metrics:
// its CRI calls, and berth's phases.
func writeStartupMetrics(p func(string, ...any), s StartupResult) {
	p("%s: CRI calls per pod\t%s\n", s.Network, formatCalls(s.CRICallsPerPod))
	if s.StartupBerth == nil {
		return
	}
	ph := s.PhasesMeanMs
	p("%s: berth's phases (mean ms)\tadmission %.1f, sandbox %.1f, image %.1f, create %.1f, start %.1f\n", s.Network, ph.Admission, ph.Sandbox, ph.ImagePull, ph.ContainerCreate, ph.ContainerStart)
}

// writeComparison prints each compared figure with every agent's median
// and berth's over the kubelet's; an agent without the figure shows a dash.
func writeComparison(p func(string, ...any), r *Report) {
	if len(r.Comparison) == 0 {
		return
	}
	agents := comparedAgents(r.Comparison)
	runs := fmt.Sprintf("median of %d runs", r.Options.CompareRuns)
	if r.Options.CompareRuns == 1 {
		runs = "1 run each"
	}
	p("COMPARISON (%s)\tunit\t%s\tberth ÷ kubelet\n", runs, strings.Join(agents, "\t"))
	for _, c := range r.Comparison {
		cells := make([]string, len(agents))
		for i, a := range agents {
			cells[i] = absent
			for _, af := range c.Agents {
				if af.Agent == a {
					cells[i] = formatFigure(af.Median)
				}
			}
		}
		ratio := absent
		if c.BerthOverKubelet != nil {
			ratio = fmt.Sprintf("%.2f", *c.BerthOverKubelet)
		}
		p("%s: %s\t%s\t%s\t%s\n", c.Scenario, c.Figure, c.Unit, strings.Join(cells, "\t"), ratio)
	}
	p("\n")
}

// comparedAgents are the agents of the comparison, in the order the
// figures list them.
func comparedAgents(cs []ComparedFigure) []string {
	var out []string
	for _, c := range cs {
		for _, a := range c.Agents {
			if !slices.Contains(out, a.Agent) {
				out = append(out, a.Agent)
			}
		}
	}
	return out
}

// formatFigure shows a figure with three significant digits or more, a
// whole number without decimals.
func formatFigure(v float64) string {
	switch {
	case v == math.Trunc(v) || math.Abs(v) >= 100: // counts, and large figures
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
