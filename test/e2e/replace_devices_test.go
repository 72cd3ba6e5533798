package e2e

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// slowPairPod asks for two of the three widgets and takes its grace period
// to stop (sleep as PID 1 ignores SIGTERM); gen changes its UID.
func slowPairPod(gen int) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: pair, labels: {gen: "%d"}}
spec:
  terminationGracePeriodSeconds: 8
  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
    resources:
      limits: {%s: 2}
`, gen, busybox, widget)
}

// A pod replaced by one of its name that needs the same devices (its
// manifest edited, live or while berth is down) waits for the old one to
// stop and then gets them: the kubelet holds a static pod back until its
// predecessor has terminated. berth before this fix admitted the new pod at
// once, found one free widget of the two it needs, held by the dying pod,
// and rejected it for good with UnexpectedAdmissionError (make chaos, after
// a kill -9 of berth amid churn).
func TestReplacedDevicePodWaitsForItsPredecessor(t *testing.T) {
	for _, tc := range []struct {
		name string
		down bool // the manifest is edited while berth is killed
	}{{"live", false}, {"while berth is down", true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t)
			p := startWidgets(t, n)
			n.waitAllocatable(3)
			n.writeManifest("pair.yaml", slowPairPod(1))
			old := n.waitRunning("pair", 60*time.Second)
			n.wantWidgets(old, "w0,w1")

			if tc.down {
				n.kill9()
			}
			n.writeManifest("pair.yaml", slowPairPod(2))
			if tc.down {
				registrations := p.Calls().Registrations
				n.start()
				if err := p.WaitRegistered(t.Context(), registrations+1); err != nil {
					t.Fatalf("the plugin did not register again: %v", err)
				}
			}
			var replaced *v1.Pod
			waitFor(t, 2*time.Minute, "the new pair Running, the old one gone", func() (bool, string) {
				replaced = nil
				var olds []types.UID
				for _, p := range n.pods() {
					if p.Name != "pair-"+nodeName {
						continue
					}
					if p.UID == old.UID {
						olds = append(olds, p.UID)
						continue
					}
					if p.Status.Phase == v1.PodFailed {
						t.Fatalf("the new pair was rejected: %s", describe(&p))
					}
					replaced = &p
				}
				ok := replaced != nil && replaced.Status.Phase == v1.PodRunning && podReady(replaced) && len(olds) == 0
				return ok, fmt.Sprintf("old %v, new %s", olds, describe(replaced))
			})
			n.wantWidgets(replaced, "w0,w1")
		})
	}
}
