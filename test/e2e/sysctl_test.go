package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// sysctlPod is a pod that sets one sysctl in its pod security context and
// prints it back from /proc/sys.
func sysctlPod(name, sysctl, value string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  securityContext:
    sysctls:
    - {name: %s, value: "%s"}
  containers:
  - name: main
    image: %s
    command: ["cat", "/proc/sys/%s"]
`, name, sysctl, value, busybox, strings.ReplaceAll(sysctl, ".", "/"))
}

// waitSysctlPrinted waits for the pod to succeed and checks that its log is
// want: the value the runtime set in the pod's namespace.
func (n *node) waitSysctlPrinted(name, want string) {
	n.t.Helper()
	waitFor(n.t, time.Minute, name+" to succeed", func() (bool, string) {
		p := n.pod(name)
		return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
	})
	out, err := n.berth("logs", name+"-"+nodeName)
	if err != nil {
		n.t.Fatalf("logs of %s: %v", name, err)
	}
	if got := strings.TrimSpace(out); got != want {
		n.t.Errorf("%s printed %q, want %q", name, got, want)
	}
}

// A safe sysctl is set in the pod (the upstream NodeConformance spec
// "Sysctls should support sysctls"), and an unsafe one the node does not
// allow refuses the pod at admission with the kubelet's reason and message
// before it gets a sandbox ("should not launch unsafe, but not explicitly
// enabled sysctls on the node").
func TestSysctlSafeAndForbidden(t *testing.T) {
	n := startNode(t)
	n.writeManifest("safe.yaml", sysctlPod("safe", "kernel.shm_rmid_forced", "1"))
	n.writeManifest("unsafe.yaml", sysctlPod("unsafe", "kernel.msgmax", "10000"))
	n.waitSysctlPrinted("safe", "1")

	const wantMsg = `forbidden sysctl: "kernel.msgmax" not allowlisted`
	var p *v1.Pod
	waitFor(t, 30*time.Second, "unsafe rejected with SysctlForbidden", func() (bool, string) {
		p = n.pod("unsafe")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "SysctlForbidden" &&
			strings.Contains(p.Status.Message, wantMsg), describe(p)
	})
	if sbs := n.sandboxes(string(p.UID)); len(sbs) != 0 {
		t.Errorf("a pod refused for its sysctls got %d sandboxes", len(sbs))
	}
}

// With --allowed-unsafe-sysctls, a pattern allows the unsafe sysctls it
// starts, and the runtime sets them in the pod's IPC namespace.
func TestSysctlAllowedUnsafe(t *testing.T) {
	n := startNode(t, "--allowed-unsafe-sysctls", "kernel.msg*")
	n.writeManifest("unsafe.yaml", sysctlPod("unsafe", "kernel.msgmax", "10000"))
	n.waitSysctlPrinted("unsafe", "10000")
}
