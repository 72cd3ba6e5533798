package agent

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/pleg"
)

// containerStates are the kubelet's container_state values, in its words
// for the CRI states.
func containerStates() []string { return []string{"created", "running", "exited", "unknown"} }

func containerState(s runtimeapi.ContainerState) string {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return "created"
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return "running"
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return "exited"
	}
	return "unknown"
}

// runtimeCounts is what the kubelet's running_pods and running_containers
// gauges report.
type runtimeCounts struct {
	// runningPods counts the pods with a ready sandbox.
	runningPods int
	// containers counts the containers of berth's pods by container_state.
	containers map[string]int
}

// countRuntime counts a relist: pods once however many ready sandboxes they
// have, and the containers whose sandbox is one of berth's (as the PLEG
// groups them).
func countRuntime(sandboxes []*runtimeapi.PodSandbox, ctrs []*runtimeapi.Container) runtimeCounts {
	out := runtimeCounts{containers: map[string]int{}}
	ours := map[string]bool{}
	running := map[types.UID]bool{}
	for _, sb := range sandboxes {
		uid := types.UID(sb.GetLabels()[container.LabelPodUID])
		if uid == "" {
			continue
		}
		ours[sb.GetId()] = true
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			running[uid] = true
		}
	}
	out.runningPods = len(running)
	for _, c := range ctrs {
		if ours[c.GetPodSandboxId()] {
			out.containers[containerState(c.GetState())]++
		}
	}
	return out
}

// runtimeCollector reports kubelet_running_pods and
// kubelet_running_containers from the PLEG's last relist: a scrape costs no
// call to the runtime, and is at most one relist period behind it.
type runtimeCollector struct {
	lastRelist func() pleg.Relist
	pods       *prometheus.Desc
	containers *prometheus.Desc
}

// registerRuntimeCollector registers on reg a collector of the runtime
// state that lastRelist returns.
func registerRuntimeCollector(reg prometheus.Registerer, lastRelist func() pleg.Relist) error {
	c := &runtimeCollector{
		lastRelist: lastRelist,
		pods: prometheus.NewDesc("kubelet_running_pods",
			"Number of pods that have a running (ready) pod sandbox.", nil, nil),
		containers: prometheus.NewDesc("kubelet_running_containers",
			"Number of containers of berth's pods in the runtime, by state.", []string{"container_state"}, nil),
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("register runtime state metrics: %w", err)
	}
	return nil
}

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pods
	ch <- c.containers
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.lastRelist()
	counts := countRuntime(r.Sandboxes, r.Containers)
	ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(counts.runningPods))
	// Every state, 0 included: a state that empties must read 0, not keep
	// its last value.
	for _, s := range containerStates() {
		ch <- prometheus.MustNewConstMetric(c.containers, prometheus.GaugeValue, float64(counts.containers[s]), s)
	}
}
