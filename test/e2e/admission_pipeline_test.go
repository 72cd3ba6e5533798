package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
)

// TestAdmissionRejectionsOneWriter follows a rejection from each end of the
// admission pipeline to the pod's status: one refused by the pipeline in
// the sync loop (a field berth cannot honour), one refused by the device
// allocation at the pod's first sync (its plugin never came back). Both
// show the kubelet's Failed status and a Warning event, neither runs, and
// each status goes with its manifest.
func TestAdmissionRejectionsOneWriter(t *testing.T) {
	// The host's containerd (Debian's 1.6), which has no user namespaces,
	// whatever runtime the run's other nodes manage.
	n := startNodeWithRuntime(t, "", "", "--device-plugin-wait", "3s")
	p := startWidgets(t, n)
	n.waitAllocatable(3)

	n.writeManifest("userns.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: userns}
spec:
  hostUsers: false
  containers: [{name: app, image: `+busybox+`, command: ["sleep", "3600"]}]
`)
	p.Stop()
	waitFor(t, 30*time.Second, "the widgets to go unhealthy", func() (bool, string) {
		r := n.devices().Resources
		return len(r) == 1 && !r[0].Connected, ""
	})
	n.writeManifest("orphan.yaml", widgetPod("orphan", 1))

	for _, tc := range []struct{ name, reason, message string }{
		{"userns", "UnsupportedPodField", "Pod was rejected: spec.hostUsers: can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{"orphan", devicemanager.ReasonUnexpectedAdmissionError, "Pod was rejected: Allocate failed due to "},
	} {
		var pod *v1.Pod
		waitFor(t, 60*time.Second, tc.name+" rejected with "+tc.reason, func() (bool, string) {
			pod = n.pod(tc.name)
			return pod != nil && pod.Status.Phase == v1.PodFailed && pod.Status.Reason == tc.reason, describe(pod)
		})
		if !strings.HasPrefix(pod.Status.Message, tc.message) {
			t.Errorf("%s: message %q, want it to start with %q", tc.name, pod.Status.Message, tc.message)
		}
		if !hasEvent(n.events(tc.name), v1.EventTypeWarning, tc.reason, "") {
			t.Errorf("%s: no %s event: %v", tc.name, tc.reason, n.events(tc.name))
		}
		if sbs := n.sandboxes(string(pod.UID)); len(sbs) != 0 {
			t.Errorf("%s: a rejected pod got %d sandboxes", tc.name, len(sbs))
		}
	}
	if msg := n.pod("orphan").Status.Message; !strings.Contains(msg, "after waiting 3s") {
		t.Errorf("orphan: message %q does not say how long it waited", msg)
	}

	n.removeManifest("userns.yaml")
	n.removeManifest("orphan.yaml")
	waitFor(t, 30*time.Second, "the rejected pods gone", func() (bool, string) {
		var left []string
		for _, name := range []string{"userns", "orphan"} {
			if n.pod(name) != nil {
				left = append(left, name)
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
}
