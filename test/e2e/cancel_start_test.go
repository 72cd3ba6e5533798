package e2e

import (
	"fmt"
	"testing"
	"time"
)

// Deleting a pod cancels its start in flight, as the kubelet's pod workers
// cancel the sync of a pod that turns terminating. Here the start is held
// by a postStart hook that would run for ten minutes (berth gives up on a
// hook after two): the pod must be gone well before berth would have given
// up, and the container after the hooked one must never be created.
func TestDeleteCancelsStartInFlight(t *testing.T) {
	n := startNode(t)
	n.writeManifest("slowstart.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: slowstart}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: hooked
    image: %[1]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    lifecycle:
      postStart:
        exec: {command: ["sleep", "600"]}
  - name: after
    image: %[1]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, busybox))
	waitFor(t, time.Minute, "the pod on /pods", func() (bool, string) { return n.pod("slowstart") != nil, "not yet" })
	uid := string(n.pod("slowstart").UID)
	// Its hook runs from the moment hooked has started.
	n.waitEvent("slowstart", "Started", "Started container hooked")

	n.removeManifest("slowstart.yaml")
	// Far less than the two minutes the hook would hold a start that is not
	// cancelled, far more than stopping two containers takes.
	waitFor(t, 90*time.Second, "the pod and its containers gone", func() (bool, string) {
		cs := n.containers(uid)
		for _, c := range cs {
			if c.GetMetadata().GetName() == "after" {
				t.Fatal("container after was created after the pod was deleted")
			}
		}
		return n.pod("slowstart") == nil && len(cs) == 0, fmt.Sprintf("%d containers", len(cs))
	})
}
