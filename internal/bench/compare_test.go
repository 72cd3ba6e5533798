package bench

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1}, 2},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.1, 0.2}, 0.15},
	} {
		in := slices.Clone(tc.in)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("median reordered its input: %v, was %v", tc.in, in)
		}
	}
}

func TestCompareFigures(t *testing.T) {
	agents := []string{agentBerth, agentKubelet, agentBerthExternal}
	run := func(agent string, running, calls float64) agentFigures {
		fs := []figure{{"start-up", "Running p50", "ms", running}}
		if calls > 0 { // berth's own metrics
			fs = append(fs, figure{"start-up", "CRI calls per pod", "calls", calls})
		}
		return agentFigures{agent: agent, figures: fs}
	}
	// Interleaved as runCompare runs them; the kubelet's second run has
	// a zero figure of its own.
	runs := []agentFigures{
		run(agentBerth, 100, 4), run(agentKubelet, 300, 0), run(agentBerthExternal, 120, 5),
		run(agentBerth, 140, 6), run(agentKubelet, 500, 0), run(agentBerthExternal, 160, 5),
		{agent: agentKubelet, figures: []figure{{"density", "all Running", "s", 0}}},
		{agent: agentBerth, figures: []figure{{"density", "all Running", "s", 2}}},
	}
	got := compareFigures(runs, agents)
	if len(got) != 3 {
		t.Fatalf("compareFigures: %d figures, want 3: %+v", len(got), got)
	}
	running := got[0]
	if running.Figure != "Running p50" || running.Unit != "ms" || len(running.Agents) != 3 {
		t.Fatalf("first figure %+v, want Running p50 of three agents", running)
	}
	wantAgents := []AgentFigure{
		{Agent: agentBerth, Median: 120, Runs: []float64{100, 140}},
		{Agent: agentKubelet, Median: 400, Runs: []float64{300, 500}},
		{Agent: agentBerthExternal, Median: 140, Runs: []float64{120, 160}},
	}
	for i, w := range wantAgents {
		g := running.Agents[i]
		if g.Agent != w.Agent || g.Median != w.Median || !slices.Equal(g.Runs, w.Runs) {
			t.Errorf("Running p50, agent %d: %+v, want %+v", i, g, w)
		}
	}
	if running.BerthOverKubelet == nil || *running.BerthOverKubelet != 0.3 {
		t.Errorf("Running p50: berth over kubelet %v, want 0.3", running.BerthOverKubelet)
	}
	calls := got[1]
	if calls.Figure != "CRI calls per pod" || len(calls.Agents) != 2 || calls.Agents[0].Agent != agentBerth || calls.Agents[1].Agent != agentBerthExternal {
		t.Errorf("berth-only figure %+v: want berth and berth (external) only", calls)
	}
	if calls.BerthOverKubelet != nil {
		t.Errorf("berth-only figure has a ratio %v; the kubelet has none", *calls.BerthOverKubelet)
	}
	// The berth run came after the kubelet's, yet berth is listed first.
	density := got[2]
	if len(density.Agents) != 2 || density.Agents[0].Agent != agentBerth || density.BerthOverKubelet != nil {
		t.Errorf("density %+v: want berth first and no ratio over a zero", density)
	}
}

func TestCompareFiguresEmpty(t *testing.T) {
	got := compareFigures(nil, []string{agentBerth})
	if got == nil || len(got) != 0 {
		t.Errorf("compareFigures(nil) = %#v, want an empty list (the report's field is always there)", got)
	}
}

func TestFiguresOfBerthOnly(t *testing.T) {
	kubelet := &Report{
		Startup: []StartupResult{{Network: "host", Pods: 3, CRICallsPerPod: []CRICalls{{"RunPodSandbox", 1}}}},
		Steady:  []SteadyResult{{Pods: 3, Berth: Usage{Cores: 0.03}, ProbesPerSecond: 6, CRICallsPerSecond: []CRICalls{{"ExecSync", 3}, {"ListContainers", 1}}}},
		Density: []DensityResult{{Pods: 5, Network: "bridge"}},
	}
	berth := &Report{
		Startup: []StartupResult{{Network: "host", Pods: 3, CRICallsPerPod: []CRICalls{{"RunPodSandbox", 1}, {"ListContainers", 2.5}}}},
		Steady: []SteadyResult{{Pods: 3, ProbesPerSecond: 6, CRICallsPerSecond: []CRICalls{{"ExecSync", 3}, {"ListContainers", 1}},
			ExecFloor: &ExecFloor{PerSecond: 14.5, MachineCPUMsPerExec: 138}}},
		Density: []DensityResult{{Pods: 5, Network: "bridge", DensityBerth: &DensityBerth{RelistMeanMs: 3, PodSyncMeanMs: 4}}},
	}
	names := func(fs []figure) map[string]float64 {
		out := map[string]float64{}
		for _, f := range fs {
			out[f.scenario+": "+f.name] = f.value
		}
		return out
	}
	k, b := names(figuresOf(kubelet)), names(figuresOf(berth))
	berthOnly := map[string]float64{
		"density, 5 pods, bridge: relist mean (berth's metrics)":              3,
		"density, 5 pods, bridge: pod sync mean (berth's metrics)":            4,
		"steady state, 3 pods: runtime alone: execs a second at most (floor)": 14.5,
		"steady state, 3 pods: runtime alone: machine CPU per exec (floor)":   138,
	}
	for name, want := range berthOnly {
		if v, ok := k[name]; ok {
			t.Errorf("the kubelet's run has %q = %v: it has no such figure", name, v)
		}
		if v, ok := b[name]; !ok || v != want {
			t.Errorf("berth's run: %q = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if len(b) != len(k)+len(berthOnly) {
		t.Errorf("berth has %d figures, the kubelet %d: want the kubelet's and the %d berth-only ones", len(b), len(k), len(berthOnly))
	}
	for _, common := range []string{"start-up, 3 pods, host: Running p50", "steady state, 3 pods: agent CPU", "density, 5 pods, bridge: all Running"} {
		if _, ok := k[common]; !ok {
			t.Errorf("the kubelet's run lacks %q", common)
		}
	}
	// The kubelet serves the same series as berth: its CRI calls and
	// probes are figures of both.
	for name, want := range map[string]float64{
		"start-up, 3 pods, host: CRI calls per pod (agent's metrics)": 1,
		"steady state, 3 pods: probes (agent's metrics)":              6,
		"steady state, 3 pods: agent CPU per probe":                   5,
		"steady state, 3 pods: CRI calls (agent's metrics)":           4,
		"steady state, 3 pods: CRI calls: ExecSync":                   3,
	} {
		if v, ok := k[name]; !ok || v != want {
			t.Errorf("the kubelet's run: %q = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if v := b["start-up, 3 pods, host: CRI calls per pod (agent's metrics)"]; v != 3.5 {
		t.Errorf("berth's CRI calls per pod = %v, want 3.5", v)
	}
}

func TestBerthOnlyFieldsAbsentFromJSON(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v      any
		fields []string
	}{
		{"start-up", StartupResult{}, []string{"phases_mean_ms"}},
		{"density", DensityResult{}, []string{"relist_mean_ms", "relist_p99_ms", "pod_sync_mean_ms", "pod_sync_p99_ms"}},
		{"steady state", SteadyResult{}, []string{"exec_floor"}},
	} {
		data, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tc.fields {
			if strings.Contains(string(data), `"`+f+`"`) {
				t.Errorf("%s without berth's figures has %q: %s", tc.name, f, data)
			}
		}
	}
	// With them, they sit where schema 1 had them: at the result's top.
	data, err := json.Marshal(DensityResult{DensityBerth: &DensityBerth{RelistMeanMs: 1.5}})
	if err != nil {
		t.Fatal(err)
	}
	var flat map[string]any
	if err := json.Unmarshal(data, &flat); err != nil {
		t.Fatal(err)
	}
	if flat["relist_mean_ms"] != 1.5 {
		t.Errorf("density with berth's figures: %s, want relist_mean_ms at the top", data)
	}
}

func TestWriteTableComparison(t *testing.T) {
	ratio := 0.25
	r := &Report{
		Options: ReportOptions{CompareRuns: 2},
		Comparison: []ComparedFigure{
			{Scenario: "start-up, 3 pods, host", Figure: "Running p50", Unit: "ms", BerthOverKubelet: &ratio, Agents: []AgentFigure{
				{Agent: agentBerth, Median: 100}, {Agent: agentKubelet, Median: 400}, {Agent: agentBerthExternal, Median: 123.4},
			}},
			{Scenario: "steady state, 3 pods", Figure: "probes (berth's metrics)", Unit: "1/s", Agents: []AgentFigure{
				{Agent: agentBerth, Median: 0.0625}, {Agent: agentBerthExternal, Median: 6},
			}},
			{Scenario: "density, 5 pods, bridge", Figure: "agent peak RSS", Unit: "MiB", Agents: []AgentFigure{
				{Agent: agentBerth, Median: 69.25}, {Agent: agentKubelet, Median: 0}, {Agent: agentBerthExternal, Median: 1.5},
			}},
		},
	}
	var b strings.Builder
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	find := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(strings.TrimPrefix(l, prefix))
			}
		}
		t.Fatalf("no line %q in:\n%s", prefix, b.String())
		return nil
	}
	if got, want := find("COMPARISON (median of 2 runs)"), []string{"unit", "berth", "kubelet", "berth", "(external)", "berth", "÷", "kubelet"}; !slices.Equal(got, want) {
		t.Errorf("header %q, want %q", got, want)
	}
	if got, want := find("start-up, 3 pods, host: Running p50"), []string{"ms", "100", "400", "123", "0.25"}; !slices.Equal(got, want) {
		t.Errorf("Running p50 row %q, want %q", got, want)
	}
	if got, want := find("steady state, 3 pods: probes (berth's metrics)"), []string{"1/s", "0.062", absent, "6", absent}; !slices.Equal(got, want) {
		t.Errorf("berth-only row %q, want %q (a dash for the kubelet and the ratio)", got, want)
	}
	if got, want := find("density, 5 pods, bridge: agent peak RSS"), []string{"MiB", "69.25", "0", "1.50", absent}; !slices.Equal(got, want) {
		t.Errorf("row with a zero %q, want %q (a zero is shown, not a dash)", got, want)
	}
}

func TestWriteTableWithoutComparison(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, &Report{Comparison: []ComparedFigure{}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "COMPARISON") {
		t.Errorf("a report without a comparison prints one:\n%s", b.String())
	}
}
