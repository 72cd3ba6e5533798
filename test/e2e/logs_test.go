package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Container logs are written in CRI format under podLogsDir and read back
// by `berth logs`, which follows a running container until it exits.
func TestLogs(t *testing.T) {
	n := startNode(t)
	n.writeManifest("talk.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: talk}
spec:
  restartPolicy: Never
  containers:
  - name: out
    image: %s
    command: ["sh", "-c", "for i in 1 2 3; do echo line-$i; echo err-$i >&2; sleep 1; done"]
`, busybox))
	waitFor(t, time.Minute, "the container to start", func() (bool, string) {
		p := n.pod("talk")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, "no status"
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Running != nil || cs.State.Terminated != nil, describe(p)
	})
	// -f returns when the container exits, with everything it wrote.
	out, err := n.berth("logs", "talk-"+nodeName, "-f")
	if err != nil {
		t.Fatalf("berth logs -f: %v", err)
	}
	for _, want := range []string{"line-1", "err-2", "line-3", "err-3"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	waitFor(t, 30*time.Second, "the pod to succeed", func() (bool, string) {
		p := n.pod("talk")
		return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
	})
	// stdout and stderr reach the log through separate pipes, so only the
	// set of the last two lines is certain, not their order.
	out, err = n.berth("logs", "talk-"+nodeName, "--tail", "2")
	lines := strings.Fields(out)
	slices.Sort(lines)
	if err != nil || strings.Join(lines, ",") != "err-3,line-3" {
		t.Errorf("berth logs --tail 2 = %q, %v", out, err)
	}
}
