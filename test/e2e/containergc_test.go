package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The container GC keeps the newest dead instance of a crash-looping
// container (maximum-dead-containers-per-container 1) and removes the
// older ones with their log files; the restart count and the previous
// instance's log survive.
func TestContainerGCKeepsNewestDeadInstance(t *testing.T) {
	n := startNode(t, "--container-gc-period", "1s")
	n.writeManifest("crash.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo run; exit 1"]
`, busybox))

	var uid string
	waitFor(t, 90*time.Second, "two restarts, and the oldest instances collected", func() (bool, string) {
		pod := n.pod("crash")
		if pod == nil || len(pod.Status.ContainerStatuses) == 0 {
			return false, "no status yet"
		}
		uid = string(pod.UID)
		var dead []string
		for _, c := range n.containers(uid) {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				dead = append(dead, c.Id)
			}
		}
		restarts := pod.Status.ContainerStatuses[0].RestartCount
		return restarts >= 2 && len(dead) == 1, fmt.Sprintf("%d restarts, dead instances %v", restarts, dead)
	})

	// Only the logs of instances the runtime still has remain.
	dir := filepath.Join(n.podLogs, "default_crash-"+nodeName+"_"+uid, "app")
	waitFor(t, 10*time.Second, "the logs of collected instances removed", func() (bool, string) {
		var want []string
		for _, c := range n.containers(uid) {
			st, err := n.cri.ContainerStatus(t.Context(), c.Id)
			if err != nil {
				return false, err.Error()
			}
			want = append(want, filepath.Base(st.LogPath))
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		slices.Sort(want)
		return slices.Equal(got, want), fmt.Sprintf("log files %v, instances' logs %v", got, want)
	})
	if slices.ContainsFunc(mustReadDir(t, dir), func(name string) bool { return name == "0.log" }) {
		t.Errorf("the first instance's log survived its container")
	}
	out, err := n.berth("logs", "crash-"+nodeName, "--previous")
	if err != nil || !strings.Contains(out, "run") {
		t.Errorf("berth logs --previous after GC: %v\n%s", err, out)
	}
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
