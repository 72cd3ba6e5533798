package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
)

// StartupResult is one start-up round: N pods on one network, through the
// agent (berth, or the kubelet in a comparison) and through direct CRI
// calls.
type StartupResult struct {
	Network string  `json:"network"` // "host" or "bridge"
	Pods    int     `json:"pods"`
	Running Latency `json:"running"` // drop to the runtime starting the pod's last container
	Ready   Latency `json:"ready"`   // drop to the agent reporting the pod Ready (/pods, polled)
	// Floor is the same pods by direct CRI calls, all at once, on berth's
	// runtime (none on the kubelet's: it would remove them).
	Floor Latency `json:"floor"`
	// Overhead is Running over Floor, percentile by percentile.
	Overhead Ratio `json:"overhead"`
	// CPU is what the round cost each side in CPU seconds: the agent
	// itself, and the runtime (containerd, shims and their runc children)
	// for the agent's pods and for the floor's.
	CPU StartupCPU `json:"cpu_seconds"`
	// CRICallsPerPod are the agent's runtime calls in the round, per pod,
	// by CRI method (kubelet_runtime_operations_total), the busiest first.
	CRICallsPerPod []CRICalls `json:"cri_calls_per_pod"`
	// *StartupBerth are the figures only berth gives (its /metrics); nil,
	// so absent from the JSON, for another agent.
	*StartupBerth
}

// StartupBerth are the start-up figures from berth's own metrics.
type StartupBerth struct {
	// PhasesMeanMs is berth's own account of where the time went, from
	// berth_pod_start_phase_duration_seconds: the mean of each phase.
	PhasesMeanMs PodStartPhases `json:"phases_mean_ms"`
}

// StartupCPU is the CPU a start-up round cost, in seconds. Berth is the
// agent's (the kubelet's, in a comparison's kubelet run).
type StartupCPU struct {
	Berth        float64 `json:"berth"`
	RuntimeBerth float64 `json:"runtime_for_berth"`
	RuntimeFloor float64 `json:"runtime_for_floor"`
}

// CRICalls is how often berth called one CRI method.
type CRICalls struct {
	Operation string  `json:"operation"`
	Calls     float64 `json:"calls"`
}

// criCallsSince is each CRI method's calls between two scrapes, divided by
// per (the pods of a round, the seconds of a window), the busiest first.
func criCallsSince(before, after map[string]*dto.MetricFamily, per float64) []CRICalls {
	const name = "kubelet_runtime_operations_total"
	ops := map[string]bool{}
	for _, m := range after[name].GetMetric() {
		if op := labelValue(m, "operation_type"); op != "" {
			ops[op] = true
		}
	}
	var out []CRICalls
	for op := range ops {
		match := map[string]string{"operation_type": op}
		if d := counterSum(after, name, match) - counterSum(before, name, match); d > 0 {
			out = append(out, CRICalls{Operation: op, Calls: round3(d / per)})
		}
	}
	sortCalls(out)
	return out
}

// sortCalls puts the busiest method first, then by name.
func sortCalls(calls []CRICalls) {
	slices.SortFunc(calls, func(a, b CRICalls) int {
		if c := cmp.Compare(b.Calls, a.Calls); c != 0 {
			return c
		}
		return strings.Compare(a.Operation, b.Operation)
	})
}

// PodStartPhases are the phases of berth_pod_start_phase_duration_seconds.
type PodStartPhases struct {
	Admission       float64 `json:"admission"`
	Sandbox         float64 `json:"sandbox"`
	ImagePull       float64 `json:"image_pull"`
	ContainerCreate float64 `json:"container_create"`
	ContainerStart  float64 `json:"container_start"`
}

func phasesSince(before, after map[string]*dto.MetricFamily) PodStartPhases {
	mean := func(phase string) float64 {
		match := map[string]string{"phase": phase}
		return histogramOf(after, podStartPhaseMetric, match).since(histogramOf(before, podStartPhaseMetric, match)).meanMs()
	}
	return PodStartPhases{
		Admission: mean("admission"), Sandbox: mean("sandbox"), ImagePull: mean("image_pull"),
		ContainerCreate: mean("container_create"), ContainerStart: mean("container_start"),
	}
}

const (
	podStartPhaseMetric = "berth_pod_start_phase_duration_seconds"
	startupNamespace    = "bench"
	hostPortBase        = 18000
	// readyPoll is how often the harness reads /pods for Ready: the Ready
	// figures are as fine as this, and each read of 50 pods costs berth
	// about 4 ms of CPU (at 50 ms it was a sixth of berth's start-up CPU).
	readyPoll = 100 * time.Millisecond
)

// startupProfile is how long berth's CPU is profiled from the drop, when
// profiles are asked for.
const startupProfile = 10 * time.Second

func runStartup(ctx context.Context, n nodeUnderTest, pods int, hostNetwork bool, profileDir string) (StartupResult, error) {
	res := StartupResult{Network: networkName(hostNetwork), Pods: pods}
	port := func(i int) int {
		if hostNetwork {
			return hostPortBase + i
		}
		return 8080
	}

	b, isBerth := n.(*node)
	profiled := closedDone()
	if isBerth {
		// The floor first: the same image, command and network, no
		// agent. Beside berth only: the kubelet kills what it finds in
		// its runtime that it did not make (its orphaned pods' clean-up).
		if err := measureFloor(ctx, n, &res, hostNetwork, port); err != nil {
			return res, err
		}
	}
	before, err := n.scrape(ctx, "/metrics")
	if err != nil {
		return res, fmt.Errorf("%s's /metrics: %w", n.agent(), err)
	}
	if isBerth {
		profiled = b.profileInBackground(ctx, profileDir, startupProfile, fmt.Sprintf("berth-startup-%s-%d.pprof", networkName(hostNetwork), pods))
	}
	if err := dropAndTime(ctx, n, &res, hostNetwork, port); err != nil {
		return res, err
	}
	after, err := n.scrape(ctx, "/metrics")
	if err != nil {
		return res, fmt.Errorf("%s's /metrics: %w", n.agent(), err)
	}
	res.CRICallsPerPod = criCallsSince(before, after, float64(pods))
	if isBerth {
		res.StartupBerth = &StartupBerth{PhasesMeanMs: phasesSince(before, after)}
		if err := <-profiled; err != nil {
			return res, fmt.Errorf("profile berth: %w", err)
		}
	}
	return res, n.clearManifests(ctx, 5*time.Minute)
}

// closedDone is a done channel for a profile that was not asked for.
func closedDone() <-chan error {
	done := make(chan error, 1)
	done <- nil
	return done
}

// dropAndTime drops the round's manifests into the agent's dir at once
// and records, per pod, when the runtime started it and when the agent
// reported it Ready, and what the round cost the agent and the runtime.
func dropAndTime(ctx context.Context, n nodeUnderTest, res *StartupResult, hostNetwork bool, port func(int) int) error {
	names := make([]string, res.Pods)
	for i := range names {
		names[i] = fmt.Sprintf("start-%03d", i)
	}
	meter, err := newNodeMeter(n)
	if err != nil {
		return err
	}
	begin := time.Now()
	for i, name := range names {
		if err := n.writeManifest(name+".yaml", startupManifest(name, hostNetwork, port(i))); err != nil {
			return err
		}
	}
	ready, err := waitAllReady(ctx, n, begin, res.Pods)
	if err != nil {
		return err
	}
	meter.sample()
	res.CPU.Berth, res.CPU.RuntimeBerth = meter.cpuSeconds(0), meter.cpuSeconds(1)+meter.cpuSeconds(2)
	starts, err := containerStarts(ctx, n, startupNamespace)
	if err != nil {
		return err
	}
	var running, readyTimes []time.Duration
	for _, name := range names {
		pod := n.podName(name)
		at, ok := starts[pod]
		if !ok {
			return fmt.Errorf("pod %s is Ready but the runtime runs no container of it", pod)
		}
		running = append(running, at.Sub(begin))
		readyTimes = append(readyTimes, ready[pod])
	}
	res.Running, res.Ready = Summarize(running), Summarize(readyTimes)
	res.Overhead = ratioOf(res.Running, res.Floor)
	return nil
}

// measureFloor starts the pods' floor (direct CRI calls, no berth), records
// its times and the runtime's CPU in res, and removes its sandboxes.
func measureFloor(ctx context.Context, n nodeUnderTest, res *StartupResult, hostNetwork bool, port func(int) int) error {
	var floor []floorPod
	for i := range res.Pods {
		floor = append(floor, floorPod{name: fmt.Sprintf("floor-%03d", i), hostNetwork: hostNetwork, command: webCommand(port(i))})
	}
	floorMeter, err := newNodeMeter(n)
	if err != nil {
		return err
	}
	took, sandboxes, err := runFloor(ctx, n, floor)
	floorMeter.sample()
	res.CPU.RuntimeFloor = floorMeter.cpuSeconds(1) + floorMeter.cpuSeconds(2)
	if rmErr := removeSandboxes(ctx, n.criService(), sandboxes); err == nil {
		err = rmErr
	}
	if err != nil {
		return err
	}
	res.Floor = Summarize(took)
	return nil
}

// waitAllReady reads the agent's /pods until every start-up pod is Ready
// and returns when each was first seen so, from begin.
func waitAllReady(ctx context.Context, n nodeUnderTest, begin time.Time, pods int) (map[string]time.Duration, error) {
	ready := map[string]time.Duration{}
	err := poll(ctx, 5*time.Minute, readyPoll, func() (bool, error) {
		list, err := n.pods(ctx)
		if err != nil {
			return false, nil // the agent is busy; ask again
		}
		at := time.Since(begin)
		for i := range list {
			p := &list[i]
			if _, seen := ready[p.Name]; !seen && p.Namespace == startupNamespace && podReady(p) {
				ready[p.Name] = at
			}
		}
		return len(ready) == pods, nil
	})
	if err != nil {
		return ready, fmt.Errorf("%d of %d pods Ready: %w", len(ready), pods, err)
	}
	return ready, nil
}

func networkName(hostNetwork bool) string {
	if hostNetwork {
		return "host"
	}
	return "bridge"
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
