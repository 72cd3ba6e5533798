package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestLocalAPI reads /healthz, /pods, /events and /stats/summary with the
// upstream types and checks them against what the runtime itself reports.
func TestLocalAPI(t *testing.T) {
	n := startNode(t)
	n.writeManifest("api.yaml", `apiVersion: v1
kind: Pod
metadata: {name: api}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: busy
    image: `+busybox+`
    command: ["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo counted; sleep 3600"]
  - name: idle
    image: `+busybox+`
    command: ["sleep", "3600"]
`)
	pod := n.waitRunning("api", 60*time.Second)

	// /healthz?verbose: every check named and passing.
	body, err := n.get("/healthz?verbose")
	if err != nil {
		t.Fatalf("/healthz?verbose: %v", err)
	}
	for _, line := range []string{"[+]ping ok", "[+]runtime ok", "[+]pleg ok", "[+]syncloop ok", "healthz check passed"} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/healthz?verbose lacks %q:\n%s", line, body)
		}
	}
	if body, err := n.get("/healthz/nosuch"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("/healthz/nosuch: %v %s", err, body)
	}

	// /pods: the containers' IDs and states are the runtime's.
	inRuntime := map[string]runtimeapi.ContainerState{}
	for _, c := range n.containers(string(pod.UID)) {
		inRuntime[c.Id] = c.State
	}
	if len(pod.Status.ContainerStatuses) != 2 {
		t.Fatalf("/pods shows %d container statuses: %s", len(pod.Status.ContainerStatuses), describe(pod))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		if state, ok := inRuntime[id]; !ok || state != runtimeapi.ContainerState_CONTAINER_RUNNING || cs.State.Running == nil {
			t.Errorf("container %s: /pods says %s running=%v, the runtime %v (found %v)", cs.Name, id, cs.State.Running != nil, state, ok)
		}
	}
	sbs := n.sandboxes(string(pod.UID))
	if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("runtime sandboxes: %v", sbs)
	}

	// /events: the pod's history as a v1 EventList, with the kubelet's
	// reasons, about this pod instance.
	var events v1.EventList
	n.getJSON("/events", &events)
	started := 0
	for _, e := range events.Items {
		if e.InvolvedObject.UID == pod.UID && e.Reason == "Started" {
			started++
			if e.Count < 1 || e.Source.Component != "berth" || e.Type != v1.EventTypeNormal {
				t.Errorf("Started event: %+v", e)
			}
		}
	}
	if events.Kind != "EventList" || started != 2 {
		t.Errorf("/events: kind %q, %d Started events of the pod, want 2", events.Kind, started)
	}

	// /stats/summary: the node and the pod, against the runtime's own
	// container stats, read before and after (CPU only grows).
	waitFor(t, 30*time.Second, "the busy container to finish counting", func() (bool, string) {
		out, _ := n.berth("logs", "api-"+nodeName, "-c", "busy")
		return strings.Contains(out, "counted"), out
	})
	before := n.containerCPU(pod)
	var summary statsapi.Summary
	n.getJSON("/stats/summary", &summary)
	after := n.containerCPU(pod)

	node := summary.Node
	if node.NodeName != nodeName || node.Memory == nil || node.Memory.WorkingSetBytes == nil || *node.Memory.WorkingSetBytes == 0 {
		t.Errorf("node memory: %+v", node.Memory)
	}
	if node.CPU == nil || node.CPU.UsageCoreNanoSeconds == nil || *node.CPU.UsageCoreNanoSeconds < before["busy"] {
		t.Errorf("node cpu: %+v, less than the busy container's %d ns", node.CPU, before["busy"])
	}
	if node.Fs == nil || node.Fs.CapacityBytes == nil || *node.Fs.CapacityBytes == 0 {
		t.Errorf("node fs: %+v", node.Fs)
	}
	if node.Runtime == nil || node.Runtime.ImageFs == nil || node.Runtime.ImageFs.CapacityBytes == nil || *node.Runtime.ImageFs.CapacityBytes == 0 {
		t.Errorf("runtime imagefs: %+v", node.Runtime)
	}
	var ps *statsapi.PodStats
	for i := range summary.Pods {
		if summary.Pods[i].PodRef.UID == string(pod.UID) {
			ps = &summary.Pods[i]
		}
	}
	if ps == nil {
		t.Fatalf("/stats/summary has no stats of pod %s", pod.UID)
	}
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil || *ps.Memory.WorkingSetBytes == 0 {
		t.Errorf("pod memory: %+v", ps.Memory)
	}
	// The pod cgroup holds both containers: it used at least what they did.
	if ps.CPU == nil || ps.CPU.UsageCoreNanoSeconds == nil || *ps.CPU.UsageCoreNanoSeconds < before["busy"]+before["idle"] {
		t.Errorf("pod cpu: %+v, less than its containers' %d ns", ps.CPU, before["busy"]+before["idle"])
	}
	if ps.EphemeralStorage == nil || ps.EphemeralStorage.UsedBytes == nil {
		t.Errorf("pod ephemeral storage: %+v", ps.EphemeralStorage)
	}
	if len(ps.Containers) != 2 {
		t.Fatalf("pod has %d container stats", len(ps.Containers))
	}
	for _, cs := range ps.Containers {
		if cs.CPU == nil || cs.CPU.UsageCoreNanoSeconds == nil {
			t.Errorf("container %s cpu: %+v", cs.Name, cs.CPU)
			continue
		}
		got := *cs.CPU.UsageCoreNanoSeconds
		if got < before[cs.Name] || got > after[cs.Name] {
			t.Errorf("container %s cpu %d ns, the runtime's reads %d then %d", cs.Name, got, before[cs.Name], after[cs.Name])
		}
		if cs.Rootfs == nil || cs.Logs == nil || cs.Memory == nil {
			t.Errorf("container %s: rootfs %+v, logs %+v, memory %+v", cs.Name, cs.Rootfs, cs.Logs, cs.Memory)
		}
	}
	if busy := cpuOf(ps.Containers, "busy"); busy <= cpuOf(ps.Containers, "idle") {
		t.Errorf("the busy container used %d ns of cpu, no more than the idle one (%d)", busy, cpuOf(ps.Containers, "idle"))
	}
}

// containerCPU reads the runtime's CPU counter of each of the pod's
// containers, by name.
func (n *node) containerCPU(pod *v1.Pod) map[string]uint64 {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]uint64{}
	for _, cs := range pod.Status.ContainerStatuses {
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		resp, err := n.cri.Runtime().ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			n.t.Fatalf("container stats of %s: %v", cs.Name, err)
		}
		out[cs.Name] = resp.GetStats().GetCpu().GetUsageCoreNanoSeconds().GetValue()
	}
	return out
}

func cpuOf(ctrs []statsapi.ContainerStats, name string) uint64 {
	for _, c := range ctrs {
		if c.Name == name && c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
			return *c.CPU.UsageCoreNanoSeconds
		}
	}
	return 0
}
