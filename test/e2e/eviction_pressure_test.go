package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// These tests put a shared host under memory and PID pressure without
// endangering it: the threshold is set just below what the node has now,
// as berth itself observes it, so that only the hog pod's own growth
// crosses it, and the hog carries a limit of its own (memory, pids) that
// bounds what a test that goes wrong can take from the host.

// The margins, chosen against the noise of other work on the host: its
// memory.available moved by up to 600 MiB within seconds (page cache of
// builds and tests), its task count by up to 90. The hog should cross the
// threshold a third of the way through its growth, and can go on to three
// times the margin if the host's own memory grows meanwhile; the evicted
// hog's memory, freed, must take the node back above the threshold.
const (
	evictPressureMemMargin = 800 << 20 // threshold below the observed memory.available
	evictPressureMemHog    = 2400      // MiB the memory hog writes, 40 MiB a second
	evictPressurePIDMargin = 400       // threshold below the observed pid.available
	evictPressurePIDHog    = 900       // processes the PID hog forks, 25 a second
)

// evictPressureConfig writes a KubeletConfiguration whose evictionHard has
// only the given signal (so that no disk threshold of the defaults can
// fire on a busy host) and returns its path. rewrite changes the value.
type evictPressureConfig struct {
	path, extra string
	signal      string
}

func newEvictPressureConfig(t *testing.T, signal, value, extra string) *evictPressureConfig {
	c := &evictPressureConfig{path: filepath.Join(t.TempDir(), "kubelet.yaml"), signal: signal, extra: extra}
	c.rewrite(t, value)
	return c
}

func (c *evictPressureConfig) rewrite(t testing.TB, value string) {
	t.Helper()
	content := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard: {%s: "%s"}
evictionPressureTransitionPeriod: 20s
%s`, c.signal, value, c.extra)
	if err := os.WriteFile(c.path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// summary is the node's /stats/summary.
func (n *node) evictPressureSummary() statsapi.Summary {
	n.t.Helper()
	var s statsapi.Summary
	n.getJSON("/stats/summary", &s)
	return s
}

// memoryAvailable is memory.available as berth observes it.
func (n *node) evictPressureMemoryAvailable() int64 {
	n.t.Helper()
	m := n.evictPressureSummary().Node.Memory
	if m == nil || m.AvailableBytes == nil {
		n.t.Fatalf("/stats/summary has no node memory.available: %+v", m)
	}
	return int64(*m.AvailableBytes)
}

// pidAvailable is pid.available as berth observes it.
func (n *node) evictPressurePIDAvailable() int64 {
	n.t.Helper()
	r := n.evictPressureSummary().Node.Rlimit
	if r == nil || r.MaxPID == nil || r.NumOfRunningProcesses == nil {
		n.t.Fatalf("/stats/summary has no node rlimit: %+v", r)
	}
	return *r.MaxPID - *r.NumOfRunningProcesses
}

// lowest is the least of a few readings a second apart: the threshold is
// set below the node's quietest moment, not its best.
func evictPressureLowest(read func() int64) int64 {
	low := read()
	for range 4 {
		time.Sleep(time.Second)
		low = min(low, read())
	}
	return low
}

// neighbour is a Guaranteed pod that uses far less than it requests: it
// ranks after the hog and must keep running.
const evictPressureNeighbour = `
apiVersion: v1
kind: Pod
metadata: {name: neighbour}
spec:
  containers:
  - name: app
    image: ` + busybox + `
    command: ["sleep", "3600"]
    resources:
      requests: {cpu: 50m, memory: 32Mi}
      limits: {cpu: 50m, memory: 32Mi}
`

// evictPressureTune sets the threshold margin below the node's lowest
// reading (rounded down to unit) and restarts berth to read it; kill -9
// leaves the managed containerd and the pods running, so the node stays
// as it was measured. Other work on the host moves the reading too (page
// cache comes and goes by hundreds of MiB): while the reading after the
// restart is not within half a margin of where it should be, it tunes
// again, a few times, and fails if the host never settles.
func (n *node) evictPressureTune(cfg *evictPressureConfig, read func() int64, margin, unit int64, format func(int64) string) int64 {
	t := n.t
	t.Helper()
	var threshold, avail, after int64
	for try := 1; try <= 4; try++ {
		avail = evictPressureLowest(read)
		threshold = (avail - margin) / unit * unit
		cfg.rewrite(t, format(threshold))
		n.kill9()
		n.start()
		after = read()
		t.Logf("try %d: %s observed %d, threshold %s, %d after the restart", try, cfg.signal, avail, format(threshold), after)
		if gap := after - threshold; gap > margin/2 && gap < margin*3/2 {
			return threshold
		}
	}
	t.Fatalf("the host's %s keeps moving by itself (%d observed, %d after a restart, margin %d): no threshold only the hog crosses", cfg.signal, avail, after, margin)
	return 0
}

// knownCondition waits for the eviction manager's first pass since berth
// (re)started to report cond, and returns it: until then /node lists no
// such condition (Unknown), as the kubelet's node status does.
func (n *node) knownCondition(cond v1.NodeConditionType) v1.ConditionStatus {
	n.t.Helper()
	var c v1.ConditionStatus
	waitFor(n.t, 60*time.Second, string(cond)+" reported", func() (bool, string) {
		c = n.nodeCondition(cond)
		return c != v1.ConditionUnknown, string(c)
	})
	return c
}

// evictPressureWatch waits for the applied pod to be evicted and returns
// it, with whether the node showed cond as True meanwhile and when it was
// first seen so.
func (n *node) evictPressureWatch(name string, cond v1.NodeConditionType, timeout time.Duration) (pod *v1.Pod, pressureAt time.Time) {
	n.t.Helper()
	waitFor(n.t, timeout, name+" to be evicted", func() (bool, string) {
		if pressureAt.IsZero() && n.nodeCondition(cond) == v1.ConditionTrue {
			pressureAt = time.Now()
		}
		pod = n.apiPod(name)
		return pod != nil && pod.Status.Phase == v1.PodFailed, describe(pod)
	})
	if pressureAt.IsZero() && n.nodeCondition(cond) == v1.ConditionTrue {
		pressureAt = time.Now()
	}
	return pod, pressureAt
}

// evictPressureAfterwards checks what must hold once the hog is evicted:
// the Evicted event, its containers stopped, the neighbour still running in
// the same container, and the condition back to False after the transition
// period (20 s).
func (n *node) evictPressureAfterwards(hog *v1.Pod, resourceName string, neighbourID string, cond v1.NodeConditionType) {
	t := n.t
	t.Helper()
	evictedAt := time.Now()
	if !hasEvent(n.apiPodEvents(hog.Name), v1.EventTypeWarning, "Evicted", "The node was low on resource: "+resourceName+".") {
		t.Errorf("no Evicted event on %s: %v", hog.Name, n.apiPodEvents(hog.Name))
	}
	if running := n.runningContainers(string(hog.UID)); len(running) > 0 {
		t.Errorf("the evicted %s still runs containers %v", hog.Name, running)
	}
	waitFor(t, 120*time.Second, string(cond)+" to clear", func() (bool, string) {
		c := n.nodeCondition(cond)
		return c == v1.ConditionFalse, string(c)
	})
	t.Logf("%s cleared %s after the eviction (transition period 20s)", cond, time.Since(evictedAt).Round(time.Second))
	nb := n.apiPod("neighbour")
	if nb == nil || nb.Status.Phase != v1.PodRunning || containerID(t, nb, "app") != neighbourID {
		t.Errorf("the neighbour did not keep running in its container %s: %s", neighbourID, describe(nb))
	}
}

// A Burstable pod that fills a memory-backed emptyDir 40 MiB a second
// takes the node's memory.available below a threshold set 800 MiB under
// what berth observed a moment before: the node reports MemoryPressure,
// the hog is evicted with the kubelet's message (the threshold, what was
// available, and the hog's container above its request), the Guaranteed
// neighbour keeps running, and the pressure clears once the hog's memory
// is freed (its emptyDir goes with it). Then the same with a hog whose
// memory request and limit are pod-level (the kubelet's message names the
// pod's usage against its request too), and with a hog that is a sidecar,
// a restartable init container. The 2500 MiB limit of each bounds
// what the host can lose: this one has 24 GiB, of which 17 GiB available.
func TestEvictionMemoryPressure(t *testing.T) {
	cfg := newEvictPressureConfig(t, "memory.available", "100Mi", "")
	n := startNode(t, "--config", cfg.path, "--eviction-monitoring-interval", "1s")
	if out, err := n.apply(evictPressureNeighbour); err != nil {
		t.Fatalf("apply neighbour: %v\n%s", err, out)
	}
	neighbour := n.waitAPIRunning("neighbour", "", 60*time.Second)
	neighbourID := containerID(t, neighbour, "app")

	// The hog's container requests 16Mi and is limited to 2500Mi.
	n.evictPressureMemoryHog(cfg, neighbourID, "hog", `
  containers:
  - name: hog
    image: `+busybox+`
    command: ["sh", "-c", "`+evictPressureMemHogScript+`"]
    resources:
      requests: {memory: 16Mi}
      limits: {memory: 2500Mi}
    volumeMounts: [{name: mem, mountPath: /mem}]
  volumes: [{name: mem, emptyDir: {medium: Memory}}]
`, regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: (\S+), available: (\S+)\. `+
		`Container hog was using (\S+), request is 16Mi, has larger consumption of memory\. $`))

	// The pod requests 16Mi and is limited to 2500Mi; its container asks
	// nothing.
	n.evictPressureMemoryHog(cfg, neighbourID, "pod-hog", `
  resources:
    requests: {memory: 16Mi}
    limits: {memory: 2500Mi}
  containers:
  - name: hog
    image: `+busybox+`
    command: ["sh", "-c", "`+evictPressureMemHogScript+`"]
    volumeMounts: [{name: mem, mountPath: /mem}]
  volumes: [{name: mem, emptyDir: {medium: Memory}}]
`, regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: (\S+), available: (\S+)\. `+
		`Pod pod-hog was using (\S+), request is 16Mi, has larger consumption of memory\. `+
		`Container hog was using \S+, request is 0, has larger consumption of memory\. $`))

	// The hog is a sidecar (a restartable init container) above its
	// request; the app beside it stays below its own. The kubelet names
	// init containers too.
	n.evictPressureMemoryHog(cfg, neighbourID, "sidecar-hog", `
  initContainers:
  - name: hog
    image: `+busybox+`
    restartPolicy: Always
    command: ["sh", "-c", "`+evictPressureMemHogScript+`"]
    resources:
      requests: {memory: 16Mi}
      limits: {memory: 2500Mi}
    volumeMounts: [{name: mem, mountPath: /mem}]
  containers:
  - name: app
    image: `+busybox+`
    command: ["sleep", "3600"]
    resources:
      requests: {memory: 16Mi}
      limits: {memory: 32Mi}
  volumes: [{name: mem, emptyDir: {medium: Memory}}]
`, regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: (\S+), available: (\S+)\. `+
		`Container hog was using (\S+), request is 16Mi, has larger consumption of memory\. $`))
}

// evictPressureMemHogScript writes 40 MiB a second into the memory-backed
// emptyDir at /mem, up to evictPressureMemHog MiB, and then sleeps.
var evictPressureMemHogScript = fmt.Sprintf("i=0; while [ $i -lt %d ]; do dd if=/dev/zero of=/mem/f$i bs=1M count=40 2>/dev/null; i=$((i+1)); echo $((i*40)) MiB; sleep 1; done; sleep 3600",
	evictPressureMemHog/40)

// evictPressureMemoryHog tunes the threshold, starts the hog (name, with
// spec below "spec:") and checks its eviction: msg has the threshold, what
// was available, and the hog's usage as groups.
func (n *node) evictPressureMemoryHog(cfg *evictPressureConfig, neighbourID, name, spec string, msg *regexp.Regexp) {
	t := n.t
	t.Helper()
	// The threshold, in whole MiB, 800 MiB below the node's memory as it
	// is now, with berth, containerd and the neighbour running.
	threshold := n.evictPressureTune(cfg, n.evictPressureMemoryAvailable, evictPressureMemMargin, 1<<20,
		func(v int64) string { return fmt.Sprintf("%dMi", v>>20) })
	if c := n.knownCondition(v1.NodeMemoryPressure); c != v1.ConditionFalse {
		t.Fatalf("MemoryPressure is %s before the hog", c)
	}
	if out, err := n.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:" + spec); err != nil {
		t.Fatalf("apply %s: %v\n%s", name, err, out)
	}
	started := n.waitAPIRunning(name, "", 60*time.Second)
	startedAt := time.Now()
	evicted, pressureAt := n.evictPressureWatch(name, v1.NodeMemoryPressure, 180*time.Second)
	logs, _ := n.berth("logs", name, "-c", "hog")
	t.Logf("%s evicted %s after it started (MemoryPressure seen after %s); its last log lines: %q",
		name, time.Since(startedAt).Round(time.Second), evictPressureSince(startedAt, pressureAt), tail(logs, 40))
	t.Logf("message: %s", evicted.Status.Message)
	if pressureAt.IsZero() {
		t.Errorf("the node never reported MemoryPressure")
	}
	if evicted.UID != started.UID || evicted.Status.Reason != "Evicted" {
		t.Fatalf("%s: reason %q, want Evicted: %s", name, evicted.Status.Reason, describe(evicted))
	}
	m := msg.FindStringSubmatch(evicted.Status.Message)
	if m == nil {
		t.Fatalf("%s's message %q is not the kubelet's", name, evicted.Status.Message)
	}
	// Quantities, as the kubelet prints them: 16Gi, 17659160Ki.
	quantityAt, availableAt, usage := evictPressureQuantity(t, m[1]), evictPressureQuantity(t, m[2]), evictPressureQuantity(t, m[3])
	if quantityAt != threshold {
		t.Errorf("threshold quantity %s in the message, want %dMi", m[1], threshold>>20)
	}
	if availableAt >= threshold {
		t.Errorf("available %s in the message is not below the threshold %dMi", m[2], threshold>>20)
	}
	// The hog had written a good part of its memory: the node crossed the
	// threshold because of it.
	if usage < 100<<20 {
		t.Errorf("%s was using only %s when evicted: the host, not the hog, crossed the threshold", name, m[3])
	}
	// The hog's memory is its emptyDir's: it is freed when berth tears the
	// volume down with the pod's directory.
	podDir := filepath.Join(n.root, "pods", string(evicted.UID))
	waitFor(t, 60*time.Second, "the hog's pod directory to go", func() (bool, string) {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	n.evictPressureAfterwards(evicted, "memory", neighbourID, v1.NodeMemoryPressure)
}

// A pod that forks sleeping processes, 25 a second, takes the node's
// pid.available below a threshold set 400 under what berth observed a
// moment before: the node reports PIDPressure and the hog, which runs the
// most processes, is evicted with the kubelet's message; the neighbour
// keeps running and the pressure clears. podPidsLimit bounds what the
// host can lose.
func TestEvictionPIDPressure(t *testing.T) {
	cfg := newEvictPressureConfig(t, "pid.available", "100", "podPidsLimit: 1000\n")
	n := startNode(t, "--config", cfg.path, "--eviction-monitoring-interval", "1s")
	if out, err := n.apply(evictPressureNeighbour); err != nil {
		t.Fatalf("apply neighbour: %v\n%s", err, out)
	}
	neighbour := n.waitAPIRunning("neighbour", "", 60*time.Second)
	neighbourID := containerID(t, neighbour, "app")

	threshold := n.evictPressureTune(cfg, n.evictPressurePIDAvailable, evictPressurePIDMargin, 1,
		func(v int64) string { return strconv.FormatInt(v, 10) })
	if c := n.knownCondition(v1.NodePIDPressure); c != v1.ConditionFalse {
		t.Fatalf("PIDPressure is %s before the hog", c)
	}

	hog := fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: forker}
spec:
  containers:
  - name: forker
    image: %s
    command: ["sh", "-c", "i=0; while [ $i -lt %d ]; do sleep 3600 & i=$((i+1)); if [ $((i %% 25)) -eq 0 ]; then echo $i forked; sleep 1; fi; done; wait"]
    resources:
      limits: {memory: 512Mi}
`, busybox, evictPressurePIDHog)
	if out, err := n.apply(hog); err != nil {
		t.Fatalf("apply forker: %v\n%s", err, out)
	}
	started := n.waitAPIRunning("forker", "", 60*time.Second)
	startedAt := time.Now()
	evicted, pressureAt := n.evictPressureWatch("forker", v1.NodePIDPressure, 180*time.Second)
	logs, _ := n.berth("logs", "forker")
	t.Logf("forker evicted %s after it started (PIDPressure seen after %s); its last log lines: %q",
		time.Since(startedAt).Round(time.Second), evictPressureSince(startedAt, pressureAt), tail(logs, 40))
	t.Logf("message: %s", evicted.Status.Message)
	if pressureAt.IsZero() {
		t.Errorf("the node never reported PIDPressure")
	}
	if evicted.UID != started.UID || evicted.Status.Reason != "Evicted" {
		t.Fatalf("forker: reason %q, want Evicted: %s", evicted.Status.Reason, describe(evicted))
	}
	// The kubelet names no container for pids: their usage is not measured
	// per container.
	msg := regexp.MustCompile(`^The node was low on resource: pids\. Threshold quantity: (\S+), available: (\S+)\. $`)
	m := msg.FindStringSubmatch(evicted.Status.Message)
	if m == nil {
		t.Fatalf("forker's message %q is not the kubelet's", evicted.Status.Message)
	}
	// Decimal counts, as the kubelet prints them: 31489, or 31k.
	if q := evictPressureQuantity(t, m[1]); q != threshold {
		t.Errorf("threshold quantity %s in the message, want %d", m[1], threshold)
	}
	if strings.HasSuffix(m[2], "i") {
		t.Errorf("available %s in the message is in binary units: the kubelet's is a decimal count", m[2])
	}
	if availableAt := evictPressureQuantity(t, m[2]); availableAt >= threshold {
		t.Errorf("available %s in the message is not below the threshold %d", m[2], threshold)
	}
	n.evictPressureAfterwards(evicted, "pids", neighbourID, v1.NodePIDPressure)
}

func evictPressureQuantity(t testing.TB, s string) int64 {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatalf("quantity %q in the message: %v", s, err)
	}
	return q.Value()
}

func evictPressureSince(start, at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(start).Round(time.Second).String()
}
