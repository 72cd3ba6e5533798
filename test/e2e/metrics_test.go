package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// berth's /metrics, read with Prometheus' own parser, carries the kubelet's
// series under the kubelet's names, and what they say about the node agrees
// with what the runtime itself reports.
func TestMetrics(t *testing.T) {
	n := startNode(t)
	n.writeManifest("duo.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: duo}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: one, image: %[1]s, command: ["sleep", "3600"]}
  - {name: two, image: %[1]s, command: ["sleep", "3600"]}
`, busybox))
	n.writeManifest("solo.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - {name: setup, image: %[1]s, command: ["true"]}
  containers:
  - {name: app, image: %[1]s, command: ["sleep", "3600"]}
`, busybox))
	n.waitRunning("duo", 90*time.Second)
	solo := n.waitRunning("solo", 90*time.Second)

	// The gauges follow the PLEG's relists, so they may lag the runtime by
	// a relist period.
	var m metricSet
	waitFor(t, 30*time.Second, "the running pods and containers to match the runtime", func() (bool, string) {
		m = n.scrape()
		pods, running := m.value("kubelet_running_pods", nil), m.value("kubelet_running_containers", labels{"container_state": "running"})
		wantPods, wantRunning := n.readySandboxes(), n.containersIn(runtimeapi.ContainerState_CONTAINER_RUNNING)
		return pods == float64(wantPods) && running == float64(wantRunning) && wantPods == 2 && wantRunning == 3,
			fmt.Sprintf("metrics: %v pods, %v running containers; runtime: %d ready sandboxes, %d running containers", pods, running, wantPods, wantRunning)
	})

	type check struct {
		what      string
		got, want float64
		atLeast   bool
	}
	checks := []check{
		{what: "exited containers (the init container)", got: m.value("kubelet_running_containers", labels{"container_state": "exited"}),
			want: float64(n.containersIn(runtimeapi.ContainerState_CONTAINER_EXITED))},
		{what: "started containers", got: m.value("kubelet_started_containers_total", labels{"container_type": "container"}), want: 3, atLeast: true},
		{what: "started init containers", got: m.value("kubelet_started_containers_total", labels{"container_type": "init_container"}), want: 1, atLeast: true},
		{what: "sandboxes run", got: m.value("kubelet_runtime_operations_total", labels{"operation_type": "run_podsandbox"}), want: 2, atLeast: true},
		{what: "containers created", got: m.value("kubelet_runtime_operations_total", labels{"operation_type": "create_container"}), want: 4, atLeast: true},
		{what: "runtime versions asked", got: m.value("kubelet_runtime_operations_total", labels{"operation_type": "version"}), want: 1, atLeast: true},
		{what: "timed sandbox runs", got: m.count("kubelet_runtime_operations_duration_seconds", labels{"operation_type": "run_podsandbox"}), want: 2, atLeast: true},
		{what: "pod starts", got: m.count("kubelet_pod_start_duration_seconds", nil), want: 2},
		{what: "first syncs of pods", got: m.count("kubelet_pod_worker_duration_seconds", labels{"operation_type": "create"}), want: 2},
		{what: "relists", got: m.count("kubelet_pleg_relist_duration_seconds", nil), want: 1, atLeast: true},
	}
	// Starting these pods fails no runtime call: their error series are
	// absent or 0.
	for _, op := range []string{"run_podsandbox", "create_container", "start_container", "pull_image", "image_status"} {
		checks = append(checks, check{what: op + " errors", got: max(0, m.value("kubelet_runtime_operations_errors_total", labels{"operation_type": op}))})
	}
	for _, phase := range []string{"admission", "sandbox", "image_pull", "container_create", "container_start"} {
		checks = append(checks, check{what: "pod starts broken down in " + phase,
			got: m.count("berth_pod_start_phase_duration_seconds", labels{"phase": phase}), want: 2})
	}
	for _, c := range checks {
		if c.got < c.want || (!c.atLeast && c.got != c.want) {
			t.Errorf("%s: %v, want %v%s", c.what, c.got, c.want, map[bool]string{true: " or more"}[c.atLeast])
		}
	}
	if errs := m.family("kubelet_runtime_operations_errors_total"); errs != nil {
		for _, s := range errs.Metric {
			t.Logf("runtime errors: %s %v", s.Label[0].GetValue(), s.GetCounter().GetValue())
		}
	}

	// The phases are parts of the starts they break down.
	var phases float64
	for _, s := range m.family("berth_pod_start_phase_duration_seconds").GetMetric() {
		phases += s.GetHistogram().GetSampleSum()
	}
	if total := m.sum("kubelet_pod_start_duration_seconds", nil); phases <= 0 || phases > total+1e-6 {
		t.Errorf("the start phases add up to %vs, the starts to %vs: the phases must be a positive part of the starts", phases, total)
	}
	if seen := m.value("kubelet_pleg_last_seen_seconds", nil); math.Abs(float64(time.Now().Unix())-seen) > 60 {
		t.Errorf("the PLEG was last seen at %v, more than a minute from now (%v)", time.Unix(int64(seen), 0), time.Now())
	}

	// What metrics-server scrapes: /metrics/resource has the node's memory
	// and each running container's CPU and memory, stamped with when they
	// were read; the init container, exited, is not there.
	app := labels{"namespace": solo.Namespace, "pod": solo.Name, "container": "app"}
	var res metricSet
	waitFor(t, 30*time.Second, "solo's container in the resource metrics", func() (bool, string) {
		res = n.scrapePath("/metrics/resource")
		cpu, mem := res.value("container_cpu_usage_seconds_total", app), res.value("container_memory_working_set_bytes", app)
		node := res.value("node_memory_working_set_bytes", nil)
		return cpu > 0 && mem > 0 && node > 0,
			fmt.Sprintf("container cpu %vs, container memory %v bytes, node memory %v bytes", cpu, mem, node)
	})
	at := res.series("container_cpu_usage_seconds_total", app).GetTimestampMs()
	if math.Abs(float64(time.Now().UnixMilli()-at)) > 60e3 {
		t.Errorf("the container's CPU was read at %v, more than a minute from now", time.UnixMilli(at))
	}
	if setup := res.series("container_cpu_usage_seconds_total", labels{"pod": solo.Name, "container": "setup"}); setup != nil {
		t.Errorf("the exited init container has a CPU series: %v", setup)
	}
	if e := res.value("resource_scrape_error", nil); e != 0 {
		t.Errorf("resource_scrape_error = %v, want 0", e)
	}

	// Deleting a pod: it stops running, in the runtime and in the metrics,
	// and its worker's kill (which ends after the runtime shows the pod
	// stopped) is timed.
	n.removeManifest("duo.yaml")
	waitFor(t, 60*time.Second, "the deleted pod to leave the running pods", func() (bool, string) {
		m = n.scrape()
		pods, running := m.value("kubelet_running_pods", nil), m.value("kubelet_running_containers", labels{"container_state": "running"})
		kills, stops := m.count("kubelet_pod_worker_duration_seconds", labels{"operation_type": "kill"}),
			m.value("kubelet_runtime_operations_total", labels{"operation_type": "stop_podsandbox"})
		wantPods, wantRunning := n.readySandboxes(), n.containersIn(runtimeapi.ContainerState_CONTAINER_RUNNING)
		return pods == 1 && wantPods == 1 && running == float64(wantRunning) && kills >= 1 && stops >= 1,
			fmt.Sprintf("metrics: %v pods, %v running containers, %v kills, %v sandbox stops; runtime: %d ready sandboxes, %d running containers",
				pods, running, kills, stops, wantPods, wantRunning)
	})
	if starts := m.count("kubelet_pod_start_duration_seconds", nil); starts != 2 {
		t.Errorf("pod starts = %v after a deletion, want still 2", starts)
	}
}

// metricSet is one scrape of a metrics endpoint, parsed.
type metricSet map[string]*dto.MetricFamily

type labels map[string]string

func (n *node) scrape() metricSet {
	n.t.Helper()
	return n.scrapePath("/metrics")
}

// scrapePath is one scrape of a metrics endpoint of the read-only API.
func (n *node) scrapePath(path string) metricSet {
	n.t.Helper()
	body, err := n.get(path)
	if err != nil {
		n.t.Fatalf("GET %s: %v", path, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		n.t.Fatalf("parse %s: %v", path, err)
	}
	return families
}

func (m metricSet) family(name string) *dto.MetricFamily { return m[name] }

// series returns the series of name whose labels include want, or nil.
func (m metricSet) series(name string, want labels) *dto.Metric {
	for _, s := range m[name].GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && have[k] == v
		}
		if match {
			return s
		}
	}
	return nil
}

// value is a counter's or gauge's value; a missing series is -1, which no
// check accepts.
func (m metricSet) value(name string, want labels) float64 {
	s := m.series(name, want)
	switch {
	case s == nil:
		return -1
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	}
	return s.GetUntyped().GetValue()
}

// count is a histogram's number of observations; -1 when missing.
func (m metricSet) count(name string, want labels) float64 {
	s := m.series(name, want)
	if s.GetHistogram() == nil {
		return -1
	}
	return float64(s.GetHistogram().GetSampleCount())
}

func (m metricSet) sum(name string, want labels) float64 {
	return m.series(name, want).GetHistogram().GetSampleSum()
}

// readySandboxes counts the runtime's ready sandboxes.
func (n *node) readySandboxes() int {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbs, err := n.cri.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		n.t.Fatalf("list sandboxes: %v", err)
	}
	return len(sbs)
}

// containersIn counts the runtime's containers in state st.
func (n *node) containersIn(st runtimeapi.ContainerState) int {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := n.cri.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: st},
	})
	if err != nil {
		n.t.Fatalf("list containers: %v", err)
	}
	return len(cs)
}
