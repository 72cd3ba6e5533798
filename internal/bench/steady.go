package bench

import (
	"context"
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// SteadyResult is what a node of probed pods costs when nothing changes.
type SteadyResult struct {
	Pods          int     `json:"pods"`
	WindowSeconds float64 `json:"window_seconds"`
	// Restarts are the containers restarted in the window (liveness).
	Restarts int `json:"restarts"`
	// RunningAtStart is how many pods were Running when the window opened:
	// all of them, unless the runtime could not start them all within
	// steadyStartLimit (it runs the exec probes of those it did start).
	RunningAtStart int `json:"running_at_start"`
	// ReadyAtEnd is how many pods the agent reported Ready at the
	// window's end.
	ReadyAtEnd int   `json:"ready_at_end"`
	Berth      Usage `json:"berth"` // the agent's
	Containerd Usage `json:"containerd"`
	// Shims are the runtime's per-pod shims with their runc children (the
	// exec probes run there); their peak is the sum of each one's peak.
	Shims Usage `json:"shims"`
	// ProbesPerSecond are the probes the agent ran in the window
	// (prober_probe_total of its /metrics/probes); FailedProbesPerSecond
	// those that failed (result "failed"): on a runtime that cannot keep
	// up with the exec probes, liveness times out.
	ProbesPerSecond       float64 `json:"probes_per_second"`
	FailedProbesPerSecond float64 `json:"failed_probes_per_second"`
	// CRICallsPerSecond are the agent's runtime calls in the window, by
	// CRI method (kubelet_runtime_operations_total), the busiest first:
	// what the runtime's CPU is spent answering.
	CRICallsPerSecond []CRICalls `json:"cri_calls_per_second"`
	// ServedCRICallsPerSecond are the CRI calls the runtime served in the
	// window, by method, as containerd counts them (grpc_server_handled_total):
	// the same count for every agent, where the kubelet's own leaves out
	// its log manager's and stats provider's calls. Only on a containerd
	// the harness started (the kubelet's, berth's external one): berth's
	// managed containerd serves no metrics.
	ServedCRICallsPerSecond []CRICalls `json:"served_cri_calls_per_second"`
	// ExecFloor is the runtime's exec rate with no agent, measured on the
	// idle node before the pods start; the pods ask for one exec probe
	// each a second (steadyManifest). Beside berth only, as the other
	// floors: the kubelet would remove the harness's pod.
	ExecFloor *ExecFloor `json:"exec_floor,omitempty"`
}

const (
	// steadyWarmup lets the probes settle into their periods after the
	// last pod started, before the window opens.
	steadyWarmup = 5 * time.Second
	// steadyStartLimit bounds the wait for the steady state's pods.
	steadyStartLimit = 6 * time.Minute
	sampleEvery      = time.Second
)

func runSteady(ctx context.Context, n nodeUnderTest, pods int, window time.Duration, profileDir string) (SteadyResult, error) {
	res := SteadyResult{Pods: pods}
	if _, isBerth := n.(*node); isBerth {
		f, err := runExecFloor(ctx, n, execFloorInFlight())
		if err != nil {
			return res, err
		}
		res.ExecFloor = &f
	}
	if err := startSteadyPods(ctx, n, &res); err != nil {
		return res, err
	}
	before, err := scrapeCounters(ctx, n)
	if err != nil {
		return res, err
	}
	b, isBerth := n.(*node)
	profiled := closedDone()
	if isBerth {
		profiled = b.profileInBackground(ctx, profileDir, window, fmt.Sprintf("berth-steady-%d.pprof", pods))
	}
	restartsBefore, _, err := restartsAndReady(ctx, n)
	if err != nil {
		return res, err
	}
	meter, err := newNodeMeter(n)
	if err != nil {
		return res, err
	}
	meter.sampleEvery(ctx, sampleEvery, window)
	res.WindowSeconds = round3(time.Since(meter.start).Seconds())
	res.Berth, res.Containerd, res.Shims = meter.usage(0), meter.usage(1), meter.usage(2)
	restartsAfter, ready, err := restartsAndReady(ctx, n)
	if err != nil {
		return res, err
	}
	res.Restarts, res.ReadyAtEnd = restartsAfter-restartsBefore, ready
	after, err := scrapeCounters(ctx, n)
	if err != nil {
		return res, err
	}
	after.rates(before, res.WindowSeconds, &res)
	if isBerth {
		if err := <-profiled; err != nil {
			return res, fmt.Errorf("profile berth: %w", err)
		}
		if err := b.heapProfile(ctx, profileDir, fmt.Sprintf("berth-steady-%d.heap", pods)); err != nil {
			return res, fmt.Errorf("heap profile of berth: %w", err)
		}
	}
	return res, n.clearManifests(ctx, 10*time.Minute)
}

// startSteadyPods drops the round's manifests and waits for the pods to
// run and the probes to settle.
func startSteadyPods(ctx context.Context, n nodeUnderTest, res *SteadyResult) error {
	for i := range res.Pods {
		name := fmt.Sprintf("steady-%03d", i)
		if err := n.writeManifest(name+".yaml", steadyManifest(name)); err != nil {
			return err
		}
	}
	// Every pod Running, not Ready: where the runtime cannot keep up with
	// the exec probes, some never stay Ready, and that is a finding. Nor
	// may the runtime manage to start them all while it runs the probes of
	// those it did: then the window opens with those, and says so.
	running, err := waitRunning(ctx, n, res.Pods, steadyStartLimit)
	if err != nil && running == 0 {
		return err
	}
	res.RunningAtStart = running
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(steadyWarmup):
		return nil
	}
}

// agentCounters are the agent's counters read at one instant: its CRI
// calls (/metrics) and its probes (/metrics/probes).
type agentCounters struct {
	runtime, probes map[string]*dto.MetricFamily
	// served are the runtime's own, nil where it serves none.
	served map[string]*dto.MetricFamily
}

func scrapeCounters(ctx context.Context, n nodeUnderTest) (agentCounters, error) {
	var c agentCounters
	var err error
	if c.runtime, err = n.scrape(ctx, "/metrics"); err != nil {
		return c, fmt.Errorf("%s's /metrics: %w", n.agent(), err)
	}
	if c.probes, err = n.scrape(ctx, "/metrics/probes"); err != nil {
		return c, fmt.Errorf("%s's /metrics/probes: %w", n.agent(), err)
	}
	if c.served, err = n.scrapeRuntime(ctx); err != nil {
		return c, fmt.Errorf("%s's runtime: %w", n.agent(), err)
	}
	return c, nil
}

// rates sets res's probe and CRI call rates from the counters' rise since
// before, over a window of the given seconds.
func (c agentCounters) rates(before agentCounters, seconds float64, res *SteadyResult) {
	const probes = "prober_probe_total"
	failed := map[string]string{"result": "failed"}
	res.ProbesPerSecond = round3((counterSum(c.probes, probes, nil) - counterSum(before.probes, probes, nil)) / seconds)
	res.FailedProbesPerSecond = round3((counterSum(c.probes, probes, failed) - counterSum(before.probes, probes, failed)) / seconds)
	res.CRICallsPerSecond = criCallsSince(before.runtime, c.runtime, seconds)
	if c.served != nil {
		res.ServedCRICallsPerSecond = servedCallsSince(before.served, c.served, seconds)
	}
}

// servedCallsSince is each CRI method's calls that containerd served
// between two scrapes of its metrics, divided by per, the busiest first.
func servedCallsSince(before, after map[string]*dto.MetricFamily, per float64) []CRICalls {
	const name = "grpc_server_handled_total"
	var out []CRICalls
	for _, service := range []string{"runtime.v1.RuntimeService", "runtime.v1.ImageService"} {
		methods := map[string]bool{}
		for _, m := range after[name].GetMetric() {
			if hasLabels(m, map[string]string{"grpc_service": service}) {
				methods[labelValue(m, "grpc_method")] = true
			}
		}
		for method := range methods {
			match := map[string]string{"grpc_service": service, "grpc_method": method}
			if d := counterSum(after, name, match) - counterSum(before, name, match); d > 0 {
				out = append(out, CRICalls{Operation: method, Calls: round3(d / per)})
			}
		}
	}
	sortCalls(out)
	return out
}

// newNodeMeter follows the agent, its containerd and the shims, in that
// order; the runtime's processes with their reaped children (the shims'
// runc, and containerd's CNI plugins and shim launches).
func newNodeMeter(n nodeUnderTest) (*usageMeter, error) {
	cpid, err := n.containerdPid()
	if err != nil {
		return nil, err
	}
	return newUsageMeter(
		group{pids: func() []int { return []int{n.agentPid()} }},
		group{pids: func() []int { return []int{cpid} }, withChildren: true},
		group{pids: n.shimPids, withChildren: true},
	), nil
}

// waitRunning waits until the agent reports want pods of the bench namespace
// Running, and returns how many are.
func waitRunning(ctx context.Context, n nodeUnderTest, want int, timeout time.Duration) (running int, err error) {
	err = poll(ctx, timeout, 500*time.Millisecond, func() (bool, error) {
		list, err := n.pods(ctx)
		if err != nil {
			return false, nil
		}
		running = countRunning(list)
		return running == want, nil
	})
	if err != nil {
		return running, fmt.Errorf("%d of %d pods Running: %w", running, want, err)
	}
	return running, nil
}

// restartsAndReady counts the bench pods' container restarts and Ready
// pods, as the agent reports them.
func restartsAndReady(ctx context.Context, n nodeUnderTest) (restarts, ready int, err error) {
	list, err := n.pods(ctx)
	if err != nil {
		return 0, 0, err
	}
	for i := range list {
		p := &list[i]
		if p.Namespace != startupNamespace {
			continue
		}
		if podReady(p) {
			ready++
		}
		for _, cs := range p.Status.ContainerStatuses {
			restarts += int(cs.RestartCount)
		}
	}
	return restarts, ready, nil
}
