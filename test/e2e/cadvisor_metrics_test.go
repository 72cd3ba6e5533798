package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
)

// scrapeFamilies reads one of berth's metrics endpoints with Prometheus'
// own parser; the error says why it could not.
func (n *node) scrapeFamilies(path string) (map[string]*dto.MetricFamily, error) {
	body, err := n.get(path)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return families, nil
}

func (n *node) mustScrape(path string) map[string]*dto.MetricFamily {
	n.t.Helper()
	families, err := n.scrapeFamilies(path)
	if err != nil {
		n.t.Fatal(err)
	}
	return families
}

// sampleWith is the value of the family's series whose labels include
// every pair of want; false when there is none.
func sampleWith(f *dto.MetricFamily, want map[string]string) (float64, bool) {
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// The kubelet's metrics endpoints on a node running pods with probes:
// /metrics/cadvisor has cAdvisor's series for every running container (and
// the pod's network on its sandbox), /metrics/resource CPU and memory,
// /metrics/probes the probe counters, which count on and go with the pod.
func TestCadvisorMetricsEndpoints(t *testing.T) {
	cidr := fmt.Sprintf("10.224.%d.0/24", 100+rand.IntN(100))
	// Registered before the node's own clean-up, so it runs after it.
	t.Cleanup(func() { removeNATOf(t, cidr) })
	n := startNode(t, "--pod-cidr", cidr)
	n.writeManifest("web.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %[1]s
    command: ["sh", "-c", "mkdir -p /www; echo ok > /www/healthz; exec httpd -f -p 8080 -h /www"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
    livenessProbe:
      exec: {command: [cat, /www/healthz]}
      periodSeconds: 1
  - name: spin
    image: %[1]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do :; done"]
    resources:
      limits: {cpu: 100m, memory: 64Mi}
`, busybox))
	n.writeManifest("idle.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: idle}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: sleep
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, busybox))
	web := n.waitRunning("web", 2*time.Minute)
	idle := n.waitRunning("idle", 2*time.Minute)
	var ctrs []runningContainer
	for _, p := range []*v1.Pod{web, idle} {
		for _, c := range p.Spec.Containers {
			ctrs = append(ctrs, runningContainer{pod: p, name: c.Name, id: containerID(t, p, c.Name), cpuLimit: !c.Resources.Limits.Cpu().IsZero()})
		}
	}
	checkCadvisorMetrics(n, web, idle, ctrs)
	checkResourceMetrics(n, ctrs)
	checkProbeMetrics(n, web)
}

type runningContainer struct {
	pod      *v1.Pod
	name, id string
	cpuLimit bool
}

// checkCadvisorMetrics checks /metrics/cadvisor against the pods running.
func checkCadvisorMetrics(n *node, web, idle *v1.Pod, ctrs []runningContainer) {
	t := n.t
	t.Helper()
	// Every running container carries each series; the pods' network is on
	// their sandboxes. The first reading may predate the pods: wait for one
	// that has them all.
	containerSeries := []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
		"container_memory_usage_bytes", "container_memory_rss", "container_memory_cache", "container_fs_usage_bytes",
		"container_fs_limit_bytes", "container_start_time_seconds", "container_last_seen"}
	var first map[string]*dto.MetricFamily
	waitFor(t, time.Minute, "every running container in /metrics/cadvisor", func() (bool, string) {
		families, err := n.scrapeFamilies("/metrics/cadvisor")
		if err != nil {
			return false, err.Error()
		}
		first = families
		missing := missingSeries(families, containerSeries, ctrs, []*v1.Pod{web, idle})
		return len(missing) == 0, strings.Join(missing, ", ")
	})

	for _, c := range ctrs {
		want := map[string]string{"container": c.name, "pod": c.pod.Name}
		if ws, _ := sampleWith(first["container_memory_working_set_bytes"], want); ws <= 0 {
			t.Errorf("%s: working set %v, want > 0", c.name, ws)
		}
		if start, _ := sampleWith(first["container_start_time_seconds"], want); start <= 0 {
			t.Errorf("%s: start time %v", c.name, start)
		}
	}
	// The readiness probe's requests reach the web pod through its eth0.
	if rx, _ := sampleWith(first["container_network_receive_bytes_total"], map[string]string{"container": "", "pod": web.Name, "interface": "eth0"}); rx <= 0 {
		t.Errorf("web pod received %v bytes, want > 0 (its readiness probe calls it)", rx)
	}
	if cores, _ := sampleWith(first["machine_cpu_cores"], nil); cores < 1 {
		t.Errorf("machine_cpu_cores %v", cores)
	}
	if mem, _ := sampleWith(first["machine_memory_bytes"], nil); mem <= 0 {
		t.Errorf("machine_memory_bytes %v", mem)
	}

	// The spinning container's CPU rises from one reading to the next.
	spin := map[string]string{"container": "spin", "pod": web.Name}
	cpu0, _ := sampleWith(first["container_cpu_usage_seconds_total"], spin)
	waitFor(t, time.Minute, "the spinning container's CPU to rise", func() (bool, string) {
		cpu, _ := sampleWith(n.mustScrape("/metrics/cadvisor")["container_cpu_usage_seconds_total"], spin)
		return cpu > cpu0, fmt.Sprintf("%v, was %v", cpu, cpu0)
	})

}

// missingSeries names the series that families lack: each of names for
// every container (and CFS for those with a CPU limit), the network for
// every pod.
func missingSeries(families map[string]*dto.MetricFamily, names []string, ctrs []runningContainer, pods []*v1.Pod) []string {
	var missing []string
	for _, c := range ctrs {
		want := map[string]string{"container": c.name, "pod": c.pod.Name, "namespace": c.pod.Namespace, "name": c.id}
		all := names
		if c.cpuLimit {
			all = append(names[:len(names):len(names)], "container_cpu_cfs_periods_total",
				"container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total")
		}
		for _, name := range all {
			if _, ok := sampleWith(families[name], want); !ok {
				missing = append(missing, name+" of "+c.name)
			}
		}
	}
	for _, p := range pods {
		for _, name := range []string{"container_network_receive_bytes_total", "container_network_transmit_bytes_total"} {
			if _, ok := sampleWith(families[name], map[string]string{"container": "", "pod": p.Name, "interface": "eth0"}); !ok {
				missing = append(missing, name+" of "+p.Name)
			}
		}
	}
	return missing
}

// checkResourceMetrics checks /metrics/resource has the CPU and memory of
// every running container.
func checkResourceMetrics(n *node, ctrs []runningContainer) {
	t := n.t
	t.Helper()
	resource := n.mustScrape("/metrics/resource")
	for _, c := range ctrs {
		want := map[string]string{"container": c.name, "pod": c.pod.Name, "namespace": c.pod.Namespace}
		for _, name := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes"} {
			if _, ok := sampleWith(resource[name], want); !ok {
				t.Errorf("/metrics/resource has no %s for %s", name, c.name)
			}
		}
	}

}

// checkProbeMetrics checks /metrics/probes counts web's probes, and drops
// them once web is removed.
func checkProbeMetrics(n *node, web *v1.Pod) {
	t := n.t
	t.Helper()
	ready := map[string]string{"probe_type": "Readiness", "result": "successful", "container": "httpd",
		"pod": web.Name, "namespace": web.Namespace, "pod_uid": string(web.UID)}
	probes := n.mustScrape("/metrics/probes")
	before, ok := sampleWith(probes["prober_probe_total"], ready)
	if !ok {
		t.Fatalf("/metrics/probes has no readiness counter of web: %v", probes["prober_probe_total"])
	}
	if _, ok := sampleWith(probes["prober_probe_duration_seconds"], map[string]string{"probe_type": "Liveness", "container": "httpd", "pod": web.Name}); !ok {
		t.Errorf("/metrics/probes has no liveness duration of web")
	}
	waitFor(t, time.Minute, "the readiness counter to rise", func() (bool, string) {
		now, _ := sampleWith(n.mustScrape("/metrics/probes")["prober_probe_total"], ready)
		return now > before, fmt.Sprintf("%v, was %v", now, before)
	})

	// A removed pod's probe series go.
	n.removeManifest("web.yaml")
	waitFor(t, time.Minute, "web's probe series to go", func() (bool, string) {
		_, ok := sampleWith(n.mustScrape("/metrics/probes")["prober_probe_total"], map[string]string{"pod_uid": string(web.UID)})
		return !ok, "still there"
	})
}
