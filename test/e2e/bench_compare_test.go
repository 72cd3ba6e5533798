package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/bench"
	"github.com/berth-dev/berth/test/cluster"
)

// TestBenchCompare runs berth-bench --compare kubelet at the smallest sizes:
// every scenario on berth, the upstream kubelet and berth on an external
// containerd. Each figure the kubelet has too carries berth's ratio over
// it, berth's own figures are absent (not zero) for the kubelet, and the
// host is left as it was: no node dir, process, cgroup, bridge, NAT rule,
// kubelet chain, kernel tunable or kubelet path of the runs.
func TestBenchCompare(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Minute)
	defer cancel()
	var buildLog strings.Builder
	kubelet, err := cluster.BuildAddon(ctx, "kubelet", &buildLog)
	if err != nil {
		t.Fatalf("building the kubelet: %v\n%s", err, buildLog.String())
	}
	before := benchHostState(t)
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "berth-bench"), "--bin", bins, "--busybox", busyboxPath,
		"--idle-window", "1s", "--pods", "2", "--reaction-kills", "2", "--steady-pods", "2", "--steady-window", "2s",
		"--density-pods", "3", "--density-window", "1s", "--decisions=false", "--out", out,
		"--compare", "kubelet", "--compare-runs", "1", "--kubelet-bin", kubelet)
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("berth-bench: %v\n%s", err, output)
	}
	if !strings.Contains(string(output), "COMPARISON") {
		t.Errorf("the table has no COMPARISON section:\n%s", output)
	}
	checkComparison(t, out)
	if after := benchHostState(t); !slices.Equal(after, before) {
		t.Errorf("the host after the runs:\n%s\nbefore:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
}

// checkComparison checks the report's comparison figure by figure.
func checkComparison(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Idle) != 1 || len(r.Startup) != 2 || len(r.Reaction) != 1 || len(r.Steady) != 1 || len(r.Density) != 1 {
		t.Errorf("berth's own results: %d idle, %d start-up, %d reaction, %d steady, %d density; want 1, 2, 1, 1, 1",
			len(r.Idle), len(r.Startup), len(r.Reaction), len(r.Steady), len(r.Density))
	}
	scenarios := map[string]bool{}
	for _, c := range r.Comparison {
		scenarios[strings.SplitN(c.Scenario, ",", 2)[0]] = true
		var agents []string
		for _, a := range c.Agents {
			agents = append(agents, a.Agent)
			if len(a.Runs) != 1 || a.Runs[0] != a.Median {
				t.Errorf("%s, %s, %s: runs %v, median %v; want the one run", c.Scenario, c.Figure, a.Agent, a.Runs, a.Median)
			}
		}
		if strings.HasPrefix(c.Figure, "CRI calls: ") || strings.HasPrefix(c.Figure, "CRI served: ") {
			// One CRI method's calls: only the agents that made any.
			if len(agents) == 0 {
				t.Errorf("%s, %s: no agent", c.Scenario, c.Figure)
			}
			continue
		}
		if c.Scenario == "steady state, 2 pods" && (c.Figure == "probes (agent's metrics)" || c.Figure == "CRI calls (agent's metrics)") {
			for _, a := range c.Agents {
				if a.Median <= 0 {
					t.Errorf("%s, %s, %s: %v, want a rate from the agent's own counters", c.Scenario, c.Figure, a.Agent, a.Median)
				}
			}
		}
		berthOnly := strings.Contains(c.Figure, "berth's metrics") || strings.Contains(c.Figure, "floor")
		want := []string{"berth", "kubelet", "berth (external)"}
		switch {
		case berthOnly:
			want = []string{"berth", "berth (external)"}
		case strings.Contains(c.Figure, "containerd's metrics"):
			// Only the containerd the harness starts serves metrics.
			want = []string{"kubelet", "berth (external)"}
			for _, a := range c.Agents {
				if a.Median <= 0 {
					t.Errorf("%s, %s, %s: %v, want the calls containerd served", c.Scenario, c.Figure, a.Agent, a.Median)
				}
			}
		}
		if !slices.Equal(agents, want) {
			t.Errorf("%s, %s: agents %v, want %v", c.Scenario, c.Figure, agents, want)
		}
		if berthOnly && c.BerthOverKubelet != nil {
			t.Errorf("%s, %s: a ratio over the kubelet, which has no such figure", c.Scenario, c.Figure)
		}
		if c.Figure == "Running p50" && (c.BerthOverKubelet == nil || *c.BerthOverKubelet <= 0) {
			t.Errorf("%s, Running p50: berth over kubelet %v, want a ratio", c.Scenario, c.BerthOverKubelet)
		}
	}
	for _, s := range []string{"idle", "start-up", "reaction", "steady state", "density"} {
		if !scenarios[s] {
			t.Errorf("no %s figures in the comparison", s)
		}
	}
}

// benchHostState lists what a bench node leaves on the host if it is not
// cleaned up: its dirs in /tmp, their processes, cgroups and bridges, the
// NAT rules of the harness's CNI networks, the kubelet's chains, kernel
// tunables and fixed paths.
func benchHostState(t *testing.T) []string {
	t.Helper()
	var out []string
	dirs, _ := filepath.Glob("/tmp/berth-bench-*")
	for _, d := range dirs {
		out = append(out, "dir "+d)
		if ps, err := exec.Command("pgrep", "-f", d+"/").Output(); err == nil {
			out = append(out, "processes of "+d+": "+strings.Join(strings.Fields(string(ps)), " "))
		}
	}
	for _, pattern := range []string{"/sys/fs/cgroup/*/berth-bench-*", "/sys/fs/cgroup/berth-bench-*"} {
		cgs, _ := filepath.Glob(pattern)
		for _, c := range cgs {
			out = append(out, "cgroup "+c)
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, "bbench") {
			out = append(out, "bridge "+i.Name)
		}
	}
	nat, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(nat), "\n") {
		if strings.Contains(line, `name: \"bench-kubelet\"`) || strings.Contains(line, `name: \"bench-berth-ext\"`) {
			out = append(out, "nat "+line)
		}
	}
	for _, c := range kubeChainLines(t) {
		if strings.HasSuffix(c, ":KUBE-KUBELET-CANARY") || strings.HasSuffix(c, ":KUBE-IPTABLES-HINT") || strings.HasSuffix(c, ":KUBE-FIREWALL") {
			out = append(out, "chain "+c)
		}
	}
	for _, v := range kubeletSysctlValues(t) {
		out = append(out, "sysctl "+v)
	}
	for _, d := range fixedDirsThere() {
		out = append(out, "kubelet path "+d)
	}
	return out
}
