package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// nodeCondition returns the status of the node's condition c, as /node
// shows it.
func (n *node) nodeCondition(c v1.NodeConditionType) v1.ConditionStatus {
	n.t.Helper()
	var node v1.Node
	n.getJSON("/node", &node)
	for _, cond := range node.Status.Conditions {
		if cond.Type == c {
			return cond.Status
		}
	}
	return v1.ConditionUnknown
}

// apiPodEvents returns the events of an applied pod (in namespace default).
func (n *node) apiPodEvents(name string) []v1.Event {
	n.t.Helper()
	body, err := n.get("/pods/default/" + name + "/events")
	if err != nil {
		n.t.Fatalf("events of %s: %v", name, err)
	}
	var list v1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		n.t.Fatalf("decode events: %v", err)
	}
	return list.Items
}

// A pod that fills its emptyDir past the nodefs threshold puts the node
// under disk pressure. berth first reclaims (an unused image goes, though
// the periodic image GC is off), and, since that is not enough, evicts the
// pod using the most disk: not the static pod, which is critical, nor the
// small one. While the pressure lasts, new pods are rejected; once the
// evicted pod's volume is gone the pressure clears and pods start again.
// The eviction outlives a restart of berth.
func TestEvictionOnDiskPressure(t *testing.T) {
	// On a 400 MiB tmpfs of its own, the node starts with a few MiB used;
	// the filler's 300 MiB take the free space below 150 MiB.
	cfg := writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard: {nodefs.available: 150Mi}
evictionPressureTransitionPeriod: 20s
imageGCHighThresholdPercent: 100
imageMinimumGCAge: 0s
`)
	n := startNodeOnTmpfs(t, "400m", "--config", cfg, "--eviction-monitoring-interval", "1s", "--container-gc-period", "2s")

	unused := filepath.Join(n.root, "unused.tar")
	if err := imagebuild.WriteTarball(unused, "berth.local/unused:1", busyboxVariant(t, "unused")); err != nil {
		t.Fatal(err)
	}
	if out, err := n.berth("images", "import", "--root-dir", n.root, unused); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	n.writeManifest("keeper.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: keeper}
spec:
  containers:
  - name: app
    image: `+busybox+`
    command: ["sh", "-c", "dd if=/dev/zero of=/data/f bs=1M count=20 && sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`)
	podWriting := func(name string, mib int) string {
		return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "dd if=/dev/zero of=/data/f bs=1M count=%d && sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`, name, busybox, mib)
	}
	if out, err := n.apply(podWriting("small", 1)); err != nil {
		t.Fatalf("apply small: %v\n%s", err, out)
	}
	n.waitRunning("keeper", 60*time.Second)
	n.waitAPIRunning("small", "", 60*time.Second)
	if c := n.knownCondition(v1.NodeDiskPressure); c != v1.ConditionFalse {
		t.Fatalf("DiskPressure = %s before any filling, want False", c)
	}

	if out, err := n.apply(podWriting("filler", 300)); err != nil {
		t.Fatalf("apply filler: %v\n%s", err, out)
	}
	sawPressure := false
	var filler *v1.Pod
	waitFor(t, 90*time.Second, "the filler to be evicted", func() (bool, string) {
		if n.nodeCondition(v1.NodeDiskPressure) == v1.ConditionTrue {
			sawPressure = true
		}
		filler = n.apiPod("filler")
		return filler != nil && filler.Status.Phase == v1.PodFailed, describe(filler)
	})
	if !sawPressure {
		t.Errorf("the node never reported DiskPressure")
	}
	if filler.Status.Reason != "Evicted" || !strings.Contains(filler.Status.Message, "The node was low on resource: ephemeral-storage. Threshold quantity: 150Mi") {
		t.Errorf("filler: reason %q, message %q; want Evicted for ephemeral-storage below 150Mi", filler.Status.Reason, filler.Status.Message)
	}
	evictedEvent := slices.ContainsFunc(n.apiPodEvents("filler"), func(e v1.Event) bool {
		return e.Type == v1.EventTypeWarning && e.Reason == "Evicted" && strings.Contains(e.Message, "ephemeral-storage")
	})
	if !evictedEvent {
		t.Errorf("no Evicted event on the filler: %v", n.apiPodEvents("filler"))
	}

	// Under pressure, a new ordinary pod is turned away.
	if out, err := n.apply(podWriting("late", 1)); err != nil {
		t.Fatalf("apply late: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "the late pod to be rejected", func() (bool, string) {
		p := n.apiPod("late")
		return p != nil && p.Status.Phase == v1.PodFailed, describe(p)
	})
	if late := n.apiPod("late"); late.Status.Reason != "Evicted" || !strings.Contains(late.Status.Message, "The node had condition: [DiskPressure]") {
		t.Errorf("late: reason %q, message %q; want a rejection for DiskPressure", late.Status.Reason, late.Status.Message)
	}

	// Reclaim came first: the unused image went, though the periodic GC is
	// off. The critical and the small pod still run.
	if slices.Contains(n.imageTags(), "berth.local/unused:1") || !n.removedByGC("berth.local/unused:1") {
		t.Errorf("the unused image was not reclaimed: %v", n.imageTags())
	}
	for _, p := range []*v1.Pod{n.pod("keeper"), n.apiPod("small")} {
		if p == nil || p.Status.Phase != v1.PodRunning {
			t.Errorf("a pod that should have been spared is not running: %s", describe(p))
		}
	}
	// The evicted pod's containers go (container GC), and its volume went
	// with the eviction: the pressure clears after the transition period.
	n.waitRuntimeGone(string(filler.UID))
	waitFor(t, 60*time.Second, "DiskPressure to clear", func() (bool, string) {
		c := n.nodeCondition(v1.NodeDiskPressure)
		return c == v1.ConditionFalse, string(c)
	})
	if out, err := n.berth("describe", "node"); err != nil || !strings.Contains(out, "nodefs.available") || !strings.Contains(out, "default/filler") {
		t.Errorf("describe node: %v\n%s", err, out)
	}
	if out, err := n.apply(podWriting("later", 1)); err != nil {
		t.Fatalf("apply later: %v\n%s", err, out)
	}
	n.waitAPIRunning("later", "", 60*time.Second)
	if p := n.apiPod("filler"); p == nil || p.Status.Reason != "Evicted" {
		t.Errorf("the evicted pod's status did not stay: %s", describe(p))
	}

	// An evicted pod stays evicted when berth restarts, even after kill -9:
	// it is still wanted, but it never starts again.
	n.kill9()
	n.start()
	waitFor(t, 30*time.Second, "the filler to show Evicted again", func() (bool, string) {
		p := n.apiPod("filler")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted", describe(p)
	})
	n.waitAPIRunning("later", "", 30*time.Second)
	if ids := n.containerIDs(string(filler.UID)); ids != "" {
		t.Errorf("the evicted pod came back after a restart: %s", ids)
	}
}
