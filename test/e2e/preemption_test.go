package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/cm"
)

// worker is an applied pod that sleeps until told to stop, with requests
// of cpu ("" for none: BestEffort) up to a limit of one cpu (Burstable).
func worker(name, cpu string) string {
	resources := ""
	if cpu != "" {
		resources = fmt.Sprintf("\n    resources: {requests: {cpu: %s}, limits: {cpu: '1'}}", cpu)
	}
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]%s
`, name, busybox, resources)
}

// criticalPod is a static pod of a built-in critical priority class.
func criticalPod(name, class, cpu string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  priorityClassName: %s
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    resources: {requests: {cpu: %s}}
`, name, class, busybox, cpu)
}

func (n *node) admission(namespace, name string) admission.Result {
	n.t.Helper()
	body, err := n.get("/pods/" + namespace + "/" + name + "/admission")
	if err != nil {
		n.t.Fatalf("admission of %s: %v", name, err)
	}
	var r admission.Result
	if err := json.Unmarshal(body, &r); err != nil {
		n.t.Fatalf("decode the admission of %s: %v\n%s", name, err, body)
	}
	return r
}

func (n *node) waitPreempted(name string) {
	n.t.Helper()
	waitFor(n.t, time.Minute, name+" preempted", func() (bool, string) {
		p := n.apiPod(name)
		if p == nil {
			return false, "no such pod"
		}
		done := p.Status.Phase == v1.PodFailed && p.Status.Reason == "Preempting" &&
			p.Status.Message == "Preempted in order to admit critical pod" && len(n.runningContainers(string(p.UID))) == 0
		return done, describe(p)
	})
}

func (n *node) runningContainers(uid string) []string {
	var out []string
	for _, c := range n.containers(uid) {
		if c.State.String() == "CONTAINER_RUNNING" {
			out = append(out, c.Id)
		}
	}
	return out
}

func hasEvent(events []v1.Event, eventType, reason, fragment string) bool {
	return slices.ContainsFunc(events, func(e v1.Event) bool {
		return e.Type == eventType && e.Reason == reason && strings.Contains(e.Message, fragment)
	})
}

// On a node narrowed by systemReserved to one cpu and four pods, applied
// BestEffort and Burstable pods fill it; an ordinary pod that does not fit
// is rejected with OutOfcpu. Then critical static pods arrive and preempt
// exactly the victims the seed's algorithm names:
//   - crit-slot (system-node-critical, 50m) lacks only a pod slot: among
//     the BestEffort pods, at distance 0 each, the tie goes to the later
//     one, be2;
//   - crit-cpu (system-cluster-critical, 600m) lacks a slot and 550m:
//     every BestEffort pod gone would free the slot, so only the cpu needs
//     Burstable pods, and bu2 (600m, distance 0) beats bu1 (300m, distance
//     ((550−300)/550)² ≈ 0.21); be1 and the static crit-slot are spared.
//
// Each victim is stopped for good (Failed, Preempting) before its
// preemptor starts, and both sides get events.
func TestCriticalPodPreemption(t *testing.T) {
	capacity, err := cm.MachineCapacity(cm.MachineFiles{}, t.TempDir(), 4)
	if err != nil {
		t.Fatal(err)
	}
	cpus := capacity[v1.ResourceCPU]
	reserved := cpus.MilliValue() - 1000
	if reserved < 0 {
		t.Fatalf("the node has %s cpus; the test needs at least one", cpus.String())
	}
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 4
systemReserved: {cpu: %dm}
`, reserved))
	n := startNode(t, "--config", cfg)

	for _, p := range []string{worker("bu1", "300m"), worker("bu2", "600m")} {
		if out, err := n.apply(p); err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
	}
	n.waitAPIRunning("bu1", "", time.Minute)
	n.waitAPIRunning("bu2", "", time.Minute)

	if out, err := n.apply(worker("extra", "200m")); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "extra rejected for lack of cpu", func() (bool, string) {
		p := n.apiPod("extra")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOfcpu" &&
			p.Status.Message == "Pod was rejected: Node didn't have enough resource: cpu, requested: 200, used: 900, capacity: 1000", describe(p)
	})
	if p := n.apiPod("extra"); len(n.sandboxes(string(p.UID))) != 0 {
		t.Error("a rejected pod must not run")
	}
	if r := n.admission("default", "extra"); r.Admit || r.Preemption != nil || r.NoPreemption == "" {
		t.Errorf("extra's admission %+v: want rejected, no preemption, and why not", r)
	}

	for _, name := range []string{"be1", "be2"} {
		if out, err := n.apply(worker(name, "")); err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
		n.waitAPIRunning(name, "", time.Minute)
	}

	n.writeManifest("crit-slot.yaml", criticalPod("crit-slot", "system-node-critical", "50m"))
	n.waitPreempted("be2")
	slot := n.waitRunning("crit-slot", time.Minute)
	r := n.admission("default", slot.Name)
	if !r.Admit || r.Preemption == nil || len(r.Preemption.Victims) != 1 || r.Preemption.Victims[0].Pod != "default/be2" {
		t.Fatalf("crit-slot's admission %+v: want be2 preempted", r)
	}
	if got := r.Preemption.Requirements; len(got) != 1 || got[0].Resource != v1.ResourcePods || got[0].Quantity != 1 {
		t.Errorf("crit-slot's requirements %v, want one pod slot", got)
	}

	n.writeManifest("crit-cpu.yaml", criticalPod("crit-cpu", "system-cluster-critical", "600m"))
	n.waitPreempted("bu2")
	critCPU := n.waitRunning("crit-cpu", time.Minute)
	r = n.admission("default", critCPU.Name)
	if !r.Admit || r.Preemption == nil {
		t.Fatalf("crit-cpu's admission %+v: want a preemption", r)
	}
	var victims []string
	for _, v := range r.Preemption.Victims {
		victims = append(victims, fmt.Sprintf("%s@%.4f", v.Pod, v.Distance))
	}
	if !slices.Equal(victims, []string{"default/bu2@0.0000"}) {
		t.Errorf("crit-cpu's victims %v, want bu2 at distance 0", victims)
	}
	for _, name := range []string{"be1", "bu1"} {
		if p := n.apiPod(name); p == nil || p.Status.Phase != v1.PodRunning {
			t.Errorf("%s was not a victim but is %s", name, describe(p))
		}
	}
	if p := n.pod("crit-slot"); p == nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("the static crit-slot is critical, never a victim, but is %s", describe(p))
	}

	if ev := n.apiPodEvents("bu2"); !hasEvent(ev, v1.EventTypeWarning, "Preempting", "Preempted in order to admit critical pod") {
		t.Errorf("bu2 has no Preempting event: %v", ev)
	}
	var critEvents v1.EventList
	n.getJSON("/pods/default/"+critCPU.Name+"/events", &critEvents)
	if !hasEvent(critEvents.Items, v1.EventTypeNormal, "Preempting", "default/bu2") {
		t.Errorf("crit-cpu has no event naming its victim: %v", critEvents.Items)
	}
	if ev := n.apiPodEvents("extra"); !hasEvent(ev, v1.EventTypeWarning, "OutOfcpu", "requested: 200") {
		t.Errorf("extra has no OutOfcpu event: %v", ev)
	}
	out, err := n.berth("describe", "pod", critCPU.Name)
	for _, want := range []string{"Admitted after preempting 1 pod", "Candidates:", "default/bu1", "Victims:", "default/bu2",
		"Passed over:", "the pods chosen before it freed enough"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("berth describe pod %s lacks %q (err %v):\n%s", critCPU.Name, want, err, out)
			break
		}
	}
	out, err = n.berth("describe", "node")
	for _, want := range []string{"Non-terminated Pods:  (4 in total)", "crit-cpu-e2e-node", "Allocated resources:", "950m (95%)"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("berth describe node lacks %q (err %v):\n%s", want, err, out)
			break
		}
	}
	// Both preemptors lacked a pod slot first, the kubelet's label.
	if metrics, err := n.get("/metrics"); err != nil || !strings.Contains(string(metrics), `kubelet_preemptions{preemption_signal="pods"} 2`) {
		t.Errorf("/metrics does not count two preemptions for pods (err %v)", err)
	}

	// A restart of berth admits nothing again: the running pods stay, the
	// preempted ones stay stopped.
	n.kill9()
	n.start()
	n.waitRunning("crit-cpu", time.Minute)
	for _, name := range []string{"be1", "bu1"} {
		n.waitAPIRunning(name, "", time.Minute)
	}
	n.waitPreempted("bu2")
	n.waitPreempted("be2")
	for _, name := range []string{"bu1", critCPU.Name} {
		if r := n.admission("default", name); !r.Admit || !strings.Contains(r.Note, "without checks") {
			t.Errorf("%s after the restart: %+v, want admitted without checks, as it was running", name, r)
		}
	}
}
