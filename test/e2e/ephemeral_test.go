package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Pods past their own local storage limits are evicted as the kubelet's
// eviction manager evicts them, though the node has plenty of disk: a
// container past its ephemeral-storage limit, a pod past the sum of its
// containers' limits, an emptyDir past its sizeLimit. Each gets the
// kubelet's message; its neighbours, one without limits and one within
// them, keep running. All run on one node, whose pass checks every pod.
func TestEphemeralStorageLimits(t *testing.T) {
	n := startNode(t, "--eviction-monitoring-interval", "1s")
	pods := map[string]string{
		// The writer is past its own 10Mi; the pod's total limit
		// (10Mi + 1Gi) is not, so the container's limit is what is named.
		"layer-hog": `
  containers:
  - name: writer
    image: ` + busybox + `
    command: ["sh", "-c", "dd if=/dev/zero of=/big bs=1M count=30; sleep 3600"]
    resources: {limits: {ephemeral-storage: 10Mi}}
  - name: idle
    image: ` + busybox + `
    command: ["sleep", "3600"]
    resources: {limits: {ephemeral-storage: 1Gi}}`,
		// One container: the pod's total limit is its 10Mi, checked first.
		"pod-hog": `
  containers:
  - name: writer
    image: ` + busybox + `
    command: ["sh", "-c", "dd if=/dev/zero of=/big bs=1M count=30; sleep 3600"]
    resources: {limits: {ephemeral-storage: 10Mi}}`,
		"dir-hog": `
  containers:
  - name: writer
    image: ` + busybox + `
    command: ["sh", "-c", "dd if=/dev/zero of=/data/big bs=1M count=30; sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /data}]
  volumes: [{name: scratch, emptyDir: {sizeLimit: 10Mi}}]`,
		// Within every limit: 2 MB in its layer and 2 MB in its emptyDir.
		"modest": `
  containers:
  - name: writer
    image: ` + busybox + `
    command: ["sh", "-c", "dd if=/dev/zero of=/small bs=1M count=2; dd if=/dev/zero of=/data/small bs=1M count=2; sleep 3600"]
    resources: {limits: {ephemeral-storage: 10Mi}}
    volumeMounts: [{name: scratch, mountPath: /data}]
  volumes: [{name: scratch, emptyDir: {sizeLimit: 10Mi}}]`,
		// No limits at all, writing as much as the hogs.
		"neighbour": `
  containers:
  - name: writer
    image: ` + busybox + `
    command: ["sh", "-c", "dd if=/dev/zero of=/big bs=1M count=30; sleep 3600"]`,
	}
	var docs []string
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 30%s\n", name, pods[name]))
	}
	if out, err := n.apply(strings.Join(docs, "---\n")); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	want := map[string]string{
		"layer-hog": `Container writer exceeded its local ephemeral storage limit "10Mi". `,
		"pod-hog":   "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ",
		"dir-hog":   `Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `,
	}
	hogs := []string{"layer-hog", "pod-hog", "dir-hog"}
	// containerd measures writable layers every 10 s; du runs every pass.
	waitFor(t, 150*time.Second, "the hogs to be evicted", func() (bool, string) {
		var states []string
		done := true
		for _, name := range hogs {
			p := n.apiPod(name)
			done = done && p != nil && p.Status.Phase == v1.PodFailed
			states = append(states, name+": "+describe(p))
		}
		return done, strings.Join(states, "; ")
	})
	for _, name := range hogs {
		t.Run(name, func(t *testing.T) {
			p := n.apiPod(name)
			if p.Status.Reason != "Evicted" || p.Status.Message != want[name] {
				t.Errorf("%s: reason %q, message %q; want Evicted, %q", name, p.Status.Reason, p.Status.Message, want[name])
			}
			var evictions []v1.Event
			for _, e := range n.apiPodEvents(name) {
				if e.Reason == "Evicted" {
					evictions = append(evictions, e)
				}
			}
			if len(evictions) != 1 || evictions[0].Type != v1.EventTypeWarning || evictions[0].Message != want[name] {
				t.Errorf("Evicted events of %s: %v; want one Warning with the kubelet's message", name, evictions)
			}
			waitFor(t, 60*time.Second, name+"'s containers to stop", func() (bool, string) {
				running := len(n.runningContainers(string(p.UID)))
				return running == 0, fmt.Sprintf("%d running", running)
			})
		})
	}

	t.Run("within-limits", func(t *testing.T) {
		// The passes that evicted every hog saw these two as well: they
		// still run.
		for _, name := range []string{"modest", "neighbour"} {
			p := n.apiPod(name)
			if p == nil || p.Status.Phase != v1.PodRunning || len(n.runningContainers(string(p.UID))) != 1 {
				t.Errorf("%s should still run: %s", name, describe(p))
			}
			if events := n.apiPodEvents(name); slices.ContainsFunc(events, func(e v1.Event) bool { return e.Reason == "Evicted" }) {
				t.Errorf("%s has an Evicted event: %v", name, events)
			}
		}
		if c := n.nodeCondition(v1.NodeDiskPressure); c != v1.ConditionFalse {
			t.Errorf("DiskPressure = %s; these evictions are not node pressure", c)
		}
		logUsage(t, n, "modest")
	})
}

// logUsage logs what berth measured of the pod, and how long a summary
// took: what each pass pays for these decisions.
func logUsage(t *testing.T, n *node, name string) {
	start := time.Now()
	var summary statsapi.Summary
	n.getJSON("/stats/summary", &summary)
	took := time.Since(start)
	for _, ps := range summary.Pods {
		if ps.PodRef.Name != name {
			continue
		}
		used := func(fs *statsapi.FsStats) string {
			if fs == nil || fs.UsedBytes == nil {
				return "?"
			}
			return fmt.Sprint(*fs.UsedBytes)
		}
		parts := []string{"total " + used(ps.EphemeralStorage)}
		for _, c := range ps.Containers {
			parts = append(parts, c.Name+" rootfs "+used(c.Rootfs)+" logs "+used(c.Logs))
		}
		for _, v := range ps.VolumeStats {
			parts = append(parts, "volume "+v.Name+" "+used(&v.FsStats))
		}
		t.Logf("%s uses (bytes): %s; /stats/summary of %d pods took %v", name, strings.Join(parts, ", "), len(summary.Pods), took)
	}
}
