package bench

import (
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func TestSummarize(t *testing.T) {
	msd := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want Latency
	}{
		{"empty", nil, Latency{}},
		{"one", msd(7), Latency{N: 1, P50: 7, P90: 7, P99: 7, Max: 7, Total: 7}},
		{"two: nearest rank rounds up", msd(20, 10), Latency{N: 2, P50: 10, P90: 20, P99: 20, Max: 20, Total: 20}},
		{"hundred", msd(hundred...), Latency{N: 100, P50: 50, P90: 90, P99: 99, Max: 100, Total: 100}},
		{"sub-millisecond kept", []time.Duration{1500 * time.Microsecond}, Latency{N: 1, P50: 1.5, P90: 1.5, P99: 1.5, Max: 1.5, Total: 1.5}},
	} {
		if got := Summarize(tc.in); got != tc.want {
			t.Errorf("%s: Summarize = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestRatioOf(t *testing.T) {
	got := ratioOf(Latency{P50: 110, P90: 150, P99: 300, Max: 300}, Latency{P50: 100, P90: 100, P99: 200, Max: 0})
	if want := (Ratio{P50: 1.1, P90: 1.5, P99: 1.5, Max: 0}); got != want {
		t.Errorf("ratioOf = %+v, want %+v (a zero floor gives 0)", got, want)
	}
}

func TestParseStat(t *testing.T) {
	// The command name holds a space and a parenthesis; utime 250, stime
	// 50, cutime 30, cstime 20 ticks.
	line := "4242 (my (weird) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 8 0 123 456 789\n"
	self, children, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if self != 3*time.Second || children != 500*time.Millisecond {
		t.Errorf("parseStat = %v, %v; want 3s, 500ms", self, children)
	}
	for _, bad := range []string{"no parens", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 50 30 20 20"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) took it", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tberth\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nRssAnon:\t    8192 kB\nRssFile:\t   32768 kB\nThreads:\t9\n"
	m, err := parseStatus([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if want := (memStatus{rssBytes: 40 << 20, hwmBytes: 50 << 20, anonBytes: 8 << 20}); m != want {
		t.Errorf("parseStatus = %+v, want %+v", m, want)
	}
	if _, err := parseStatus([]byte("Name:\tzombie\n")); err == nil {
		t.Error("parseStatus took a status without VmRSS (a zombie's)")
	}
	if _, err := parseStatus([]byte("VmHWM:\t1 kB\nVmRSS:\tmany kB\n")); err == nil {
		t.Error("parseStatus took a VmRSS that is not a number")
	}
}

func TestHistogram(t *testing.T) {
	h := func(count uint64, sum float64, buckets map[float64]uint64) *dto.Metric {
		m := &dto.Metric{Label: []*dto.LabelPair{{Name: proto.String("operation_type"), Value: proto.String("sync")}},
			Histogram: &dto.Histogram{SampleCount: proto.Uint64(count), SampleSum: proto.Float64(sum)}}
		for le, c := range buckets {
			m.Histogram.Bucket = append(m.Histogram.Bucket, &dto.Bucket{UpperBound: proto.Float64(le), CumulativeCount: proto.Uint64(c)})
		}
		return m
	}
	fam := func(ms ...*dto.Metric) map[string]*dto.MetricFamily {
		return map[string]*dto.MetricFamily{"x": {Metric: ms}}
	}
	before := histogramOf(fam(h(10, 0.1, map[float64]uint64{0.005: 10, 0.01: 10, 0.1: 10, math.Inf(1): 10})), "x", nil)
	after := histogramOf(fam(h(110, 1.1, map[float64]uint64{0.005: 60, 0.01: 100, 0.1: 109, math.Inf(1): 110})), "x", map[string]string{"operation_type": "sync"})
	d := after.since(before)
	if d.count != 100 || d.meanMs() != 10 {
		t.Errorf("since: count %d mean %vms, want 100 and 10ms", d.count, d.meanMs())
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 5}, {0.9, 10}, {0.99, 100}, {1, -1}} {
		if got := d.quantileMs(tc.q); got != tc.want {
			t.Errorf("quantile %v = %vms, want %v", tc.q, got, tc.want)
		}
	}
	if got := histogramOf(fam(h(5, 1, nil)), "x", map[string]string{"operation_type": "kill"}); got.count != 0 {
		t.Errorf("labels not matched: count %d, want 0", got.count)
	}
	if (histogram{}).meanMs() != 0 || (histogram{}).quantileMs(0.99) != 0 {
		t.Error("an empty histogram must give zeros")
	}
}

func TestParseBenchOutput(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/berth-dev/berth/internal/admission
cpu: AMD EPYC
BenchmarkChoosePreemptionVictims1000-2   	    3163	    445055 ns/op	         5.000 victims	  439497 B/op	    1182 allocs/op
PASS
ok  	github.com/berth-dev/berth/internal/admission	2.1s
pkg: github.com/berth-dev/berth/internal/cm
BenchmarkCgroupValues500Pods   	 409	 3777869 ns/op
`
	got, err := parseBenchOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Decision{
		{Name: "BenchmarkChoosePreemptionVictims1000", Package: "github.com/berth-dev/berth/internal/admission", NsPerOp: 445055, BytesPerOp: 439497, AllocsPerOp: 1182},
		{Name: "BenchmarkCgroupValues500Pods", Package: "github.com/berth-dev/berth/internal/cm", NsPerOp: 3777869},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := parseBenchOutput("BenchmarkX-2 10 abc ns/op\n"); err == nil {
		t.Error("a malformed figure was taken")
	}
}

func TestEvaluateTargets(t *testing.T) {
	r := &Report{
		Idle:      []IdleResult{{Berth: Usage{Cores: 0.0015, PeakRSS: 31}}},
		Startup:   []StartupResult{{Network: "host", Pods: 50, Overhead: Ratio{P50: 1.05, P99: 1.2}}},
		Reaction:  []ReactionResult{{Restart: Latency{N: 20, P50: 95}, Floor: Latency{N: 20, P50: 79}}},
		Steady:    []SteadyResult{{Pods: 100, Berth: Usage{Cores: 0.025, PeakRSS: 61}}, {Pods: 250, Berth: Usage{Cores: 1}}},
		Density:   []DensityResult{{Pods: 250}, {Pods: 500, Running: 500, StatusFreshness: Latency{N: 10, Max: 1500}, DensityBerth: &DensityBerth{RelistP99Ms: 100}}},
		Decisions: []Decision{{Name: "BenchmarkCheckpointWrite1000", NsPerOp: 6e6}, {Name: "BenchmarkCgroupValues500Pods", NsPerOp: 1e9}},
	}
	agents := func(berth, kubelet, external float64) []AgentFigure {
		return []AgentFigure{{Agent: agentBerth, Median: berth}, {Agent: agentKubelet, Median: kubelet}, {Agent: agentBerthExternal, Median: external}}
	}
	r.Comparison = []ComparedFigure{
		{Scenario: "start-up, 50 pods, host", Figure: "Running p50", Agents: agents(3000, 4000, 4100)},
		{Scenario: "start-up, 50 pods, host", Figure: "Ready p50", Agents: agents(9000, 4000, 4000)}, // no target
		{Scenario: "steady state, 100 pods", Figure: "containerd CPU", Agents: agents(0.1, 0.1, 0.1)},
		{Scenario: "steady state, 100 pods", Figure: "shims CPU", Agents: agents(0.04, 0.05, 0.06)},
		{Scenario: "reaction, 20 kills", Figure: "kill to replacement started p50", Agents: agents(95, 500, 130)},
		{Scenario: "reaction, 20 kills", Figure: "CRI floor p50", Agents: []AgentFigure{{Agent: agentBerth, Median: 79}, {Agent: agentBerthExternal, Median: 100}}},
	}
	got := map[string]bool{}
	for _, tg := range EvaluateTargets(r) {
		got[tg.Name] = tg.Met
	}
	want := map[string]bool{
		"idle: berth CPU":                                               true,
		"idle: berth peak RSS":                                          false,
		"start-up overhead p50, 50 pods, host":                          true,
		"start-up overhead p99, 50 pods, host":                          false,
		"reaction p50, kill to replacement started (floor p50 + 20 ms)": true,
		"steady state, 100 pods: berth CPU":                             true,
		"steady state, 100 pods: berth peak RSS":                        false,
		"density, 500 pods: Running":                                    true,
		"density, 500 pods: status freshness max":                       true,
		"density, 500 pods: relist p99":                                 false,
		"BenchmarkCheckpointWrite1000":                                  false,
		// Against the kubelet in the same run.
		"start-up, 50 pods, host: Running p50, berth (the kubelet's at most)":                            true,
		"start-up, 50 pods, host: Running p50, berth (external) (the kubelet's at most)":                 false,
		"steady state, 100 pods: runtime CPU (containerd and shims) under berth (the kubelet's at most)": true,
		"reaction p50, kill to replacement started, berth (external) (floor p50 + 20 ms)":                false,
	}
	if len(got) != len(want) {
		t.Errorf("targets %v, want %v (none for 250 pods, cgroup values, Ready)", got, want)
	}
	for name, met := range want {
		if m, ok := got[name]; !ok || m != met {
			t.Errorf("target %q: met=%v (present %v), want %v", name, m, ok, met)
		}
	}
}

func TestWriteTable(t *testing.T) {
	r := &Report{Startup: []StartupResult{{Network: "host", Pods: 50}}, Targets: []Target{{Name: "x", Met: false}}}
	var b strings.Builder
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"START-UP", "host: CRI floor", "MISSED"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// A profile dir that cannot be made fails the run before it starts
// anything, not when the first profile is written minutes in.
func TestRunProfileDirUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{ProfileDir: filepath.Join(file, "prof"), Log: slog.New(slog.DiscardHandler),
		Compare: CompareOptions{Kubelet: "/nonexistent/kubelet", Runs: 1}}
	_, err := Run(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "profile dir") {
		t.Fatalf("Run = %v, want an error about the profile dir", err)
	}
}
