package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/bench"
)

// TestBenchHarness runs berth-bench end to end at the smallest sizes, as
// `make bench` does at full size, and checks that its report has every
// field of the golden list (two runs compare field by field) and figures
// that come from a real run.
func TestBenchHarness(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(filepath.Join(bins, "berth-bench"), "--bin", bins, "--busybox", busyboxPath,
		"--idle-window", "2s", "--pods", "2", "--reaction-kills", "2", "--steady-pods", "2", "--steady-window", "2s",
		"--density-pods", "3", "--density-window", "1s",
		"--decision-benchtime", "1x", "--source", "../..", "--out", out)
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("berth-bench: %v\n%s", err, output)
	}
	for _, want := range []string{"IDLE", "START-UP", "REACTION", "STEADY STATE", "DENSITY", "DECISIONS", "TARGET"} {
		if !strings.Contains(string(output), want) {
			t.Errorf("the table has no %s section:\n%s", want, output)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}

	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("testdata/bench-fields.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(fieldPaths(generic), "\n")+"\n", string(golden); got != want {
		t.Errorf("the report's fields changed (update testdata/bench-fields.golden, and bump bench.SchemaVersion if a field was renamed, removed or changed meaning):\ngot:\n%s\nwant:\n%s", got, want)
	}

	var r bench.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != bench.SchemaVersion || r.Machine.CPUs < 1 || !strings.HasPrefix(r.Machine.Runtime, "containerd") {
		t.Errorf("schema %d, machine %+v", r.Schema, r.Machine)
	}
	if len(r.Idle) != 1 || r.Idle[0].Berth.Processes != 1 || r.Idle[0].Berth.PeakRSS <= 0 || r.Idle[0].Containerd.Processes != 1 || r.Idle[0].WindowSeconds < 2 {
		t.Errorf("idle: %+v", r.Idle)
	}
	if len(r.Startup) != 2 {
		t.Fatalf("start-up rounds: %d, want host and bridge", len(r.Startup))
	}
	for _, s := range r.Startup {
		if s.Pods != 2 || s.Running.N != 2 || s.Ready.N != 2 || s.Floor.N != 2 || s.Running.P50 <= 0 || s.Floor.P50 <= 0 ||
			s.Ready.P50 < s.Running.P50 || s.Overhead.P50 <= 0 || s.StartupBerth == nil || s.PhasesMeanMs.Sandbox <= 0 {
			t.Errorf("start-up, %s: %+v", s.Network, s)
		}
	}
	if len(r.Reaction) != 1 || r.Reaction[0].Restart.N != 2 || r.Reaction[0].Restart.P50 <= 0 {
		t.Errorf("reaction: %+v", r.Reaction)
	}
	if len(r.Steady) != 1 || r.Steady[0].ProbesPerSecond <= 0 || len(r.Steady[0].CRICallsPerSecond) == 0 || r.Steady[0].Berth.PeakRSS <= 0 ||
		r.Steady[0].Containerd.Processes != 1 || r.Steady[0].Shims.Processes != 2 {
		t.Errorf("steady state: %+v", r.Steady)
	}
	// The exec floor ran before the pods, in a pod of its own that is gone
	// (the shims counted above are the two pods').
	if len(r.Steady) == 1 {
		if f := r.Steady[0].ExecFloor; f == nil || f.OneAtATime.N != 20 || f.OneAtATime.P50 <= 0 || f.PerSecond <= 0 || f.InFlight < 4 || f.MachineCPUMsPerExec <= 0 {
			t.Errorf("steady state's exec floor: %+v", f)
		}
	}
	if len(r.Density) != 1 || r.Density[0].Running != 3 || r.Density[0].StatusFreshness.N != 3 || r.Density[0].DensityBerth == nil || r.Density[0].RelistMeanMs <= 0 {
		t.Errorf("density: %+v", r.Density)
	}
	var names []string
	for _, d := range r.Decisions {
		if d.NsPerOp <= 0 {
			t.Errorf("decision %s: %v ns/op", d.Name, d.NsPerOp)
		}
		names = append(names, d.Name)
	}
	slices.Sort(names)
	if want := []string{"BenchmarkCgroupValues500Pods", "BenchmarkCheckpointWrite1000", "BenchmarkChoosePreemptionVictims1000", "BenchmarkImageGCChoice10000"}; !slices.Equal(names, want) {
		t.Errorf("decisions %v, want %v", names, want)
	}
	if len(r.Targets) == 0 {
		t.Error("no targets evaluated")
	}
}

// fieldPaths lists every field of a decoded JSON document as a dotted
// path, a list's elements as "[]", sorted.
func fieldPaths(v any) []string {
	seen := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				seen[p] = true
				walk(p, e)
			}
		case []any:
			for _, e := range x {
				walk(prefix+"[]", e)
			}
		}
	}
	walk("", v)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
