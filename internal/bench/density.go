package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
)

// DensityResult is how the agent (berth, or the kubelet in a comparison)
// holds many pods: whether they all run, how fresh their status stays, and
// what keeping them costs.
type DensityResult struct {
	Pods    int    `json:"pods"`
	Network string `json:"network"`
	// Running is how many the agent reported Running at the end of the
	// window.
	Running           int     `json:"running"`
	AllRunningSeconds float64 `json:"all_running_seconds"` // drop to every pod Running
	WindowSeconds     float64 `json:"window_seconds"`
	// StatusFreshness is, for pods whose container was killed, the time
	// until /pods showed the restart.
	StatusFreshness Latency `json:"status_freshness"`
	Berth           Usage   `json:"berth"` // the agent's
	Containerd      Usage   `json:"containerd"`
	// *DensityBerth are the figures from berth's own metrics; nil, so
	// absent from the JSON, for another agent.
	*DensityBerth
}

// DensityBerth are berth's relist and pod sync latencies over the window
// and the restarts after it.
type DensityBerth struct {
	RelistMeanMs  float64 `json:"relist_mean_ms"`
	RelistP99Ms   float64 `json:"relist_p99_ms"` // a bucket's upper bound
	PodSyncMeanMs float64 `json:"pod_sync_mean_ms"`
	PodSyncP99Ms  float64 `json:"pod_sync_p99_ms"`
}

const (
	freshnessSamples = 10
	// freshnessPoll is how often /pods is read while waiting for a
	// restart to show; a /pods of 500 pods is a few MiB, so not too often.
	freshnessPoll = 250 * time.Millisecond
)

func runDensity(ctx context.Context, n nodeUnderTest, pods int, hostNetwork bool, window time.Duration, profileDir string) (DensityResult, error) {
	res := DensityResult{Pods: pods, Network: networkName(hostNetwork)}
	names, err := dropDensityPods(ctx, n, &res, hostNetwork)
	if err != nil {
		return res, err
	}
	b, isBerth := n.(*node)
	var before map[string]*dto.MetricFamily
	if isBerth {
		if before, err = b.metrics(ctx); err != nil {
			return res, err
		}
	}
	meter, err := newNodeMeter(n)
	if err != nil {
		return res, err
	}
	profiled := closedDone()
	if isBerth {
		profiled = b.profileInBackground(ctx, profileDir, window, fmt.Sprintf("berth-density-%d.pprof", pods))
	}
	meter.sampleEvery(ctx, sampleEvery, window)
	res.WindowSeconds = round3(time.Since(meter.start).Seconds())
	res.Berth, res.Containerd = meter.usage(0), meter.usage(1)
	if err := <-profiled; err != nil {
		return res, fmt.Errorf("profile berth: %w", err)
	}
	list, err := n.pods(ctx)
	if err != nil {
		return res, err
	}
	res.Running = countRunning(list)

	var fresh []time.Duration
	for i := range min(freshnessSamples, pods) {
		d, err := restartShows(ctx, n, n.podName(names[i*pods/min(freshnessSamples, pods)]))
		if err != nil {
			return res, err
		}
		fresh = append(fresh, d)
	}
	res.StatusFreshness = Summarize(fresh)
	if isBerth {
		// The latencies span the quiet window and the restarts after
		// it, so that the pod workers' syncs are in them.
		after, err := b.metrics(ctx)
		if err != nil {
			return res, err
		}
		res.DensityBerth = densityBerthSince(before, after)
	}
	return res, n.clearManifests(ctx, 20*time.Minute)
}

// dropDensityPods drops the round's manifests and waits until the agent
// reports every pod Running; it returns the manifests' names.
func dropDensityPods(ctx context.Context, n nodeUnderTest, res *DensityResult, hostNetwork bool) ([]string, error) {
	names := make([]string, res.Pods)
	begin := time.Now()
	for i := range names {
		names[i] = fmt.Sprintf("dense-%03d", i)
		if err := n.writeManifest(names[i]+".yaml", densityManifest(names[i], hostNetwork)); err != nil {
			return nil, err
		}
	}
	running := 0
	err := poll(ctx, 20*time.Minute, time.Second, func() (bool, error) {
		list, err := n.pods(ctx)
		if err != nil {
			return false, nil
		}
		running = countRunning(list)
		return running == res.Pods, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d of %d pods Running: %w", running, res.Pods, err)
	}
	res.AllRunningSeconds = round3(time.Since(begin).Seconds())
	return names, nil
}

// densityBerthSince reads berth's relist and sync latencies between two
// scrapes of its /metrics.
func densityBerthSince(before, after map[string]*dto.MetricFamily) *DensityBerth {
	var d DensityBerth
	relist := histogramOf(after, "kubelet_pleg_relist_duration_seconds", nil).since(histogramOf(before, "kubelet_pleg_relist_duration_seconds", nil))
	d.RelistMeanMs, d.RelistP99Ms = relist.meanMs(), relist.quantileMs(0.99)
	sync := map[string]string{"operation_type": "sync"}
	syncs := histogramOf(after, "kubelet_pod_worker_duration_seconds", sync).since(histogramOf(before, "kubelet_pod_worker_duration_seconds", sync))
	d.PodSyncMeanMs, d.PodSyncP99Ms = syncs.meanMs(), syncs.quantileMs(0.99)
	return &d
}

func countRunning(list []v1.Pod) int {
	running := 0
	for i := range list {
		if list[i].Namespace == startupNamespace && list[i].Status.Phase == v1.PodRunning {
			running++
		}
	}
	return running
}

// restartShows kills pod's container and returns the time until the
// agent's /pods shows it restarted.
func restartShows(ctx context.Context, n nodeUnderTest, pod string) (time.Duration, error) {
	id, err := runningContainerID(ctx, n, startupNamespace, pod)
	if err != nil {
		return 0, err
	}
	pid, err := containerPid(ctx, n, id)
	if err != nil {
		return 0, err
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill the container of %s (pid %d): %w", pod, pid, err)
	}
	var took time.Duration
	err = poll(ctx, time.Minute, freshnessPoll, func() (bool, error) {
		list, err := n.pods(ctx)
		if err != nil {
			return false, nil
		}
		for i := range list {
			p := &list[i]
			if p.Name == pod && p.Namespace == startupNamespace && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount > 0 {
				took = time.Since(killed)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("the restart of %s never showed in /pods: %w", pod, err)
	}
	return took, nil
}
