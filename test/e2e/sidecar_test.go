package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// findInitStatus is findStatus for init containers.
func findInitStatus(pod *v1.Pod, name string) v1.ContainerStatus {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return v1.ContainerStatus{}
}

// sidecarScript loops until SIGTERM, when it appends name to the host's
// stops file, or until /tmp/quit appears, when it exits 3 on its own.
func sidecarScript(name string) string {
	return fmt.Sprintf(`trap 'echo %s >> /host/stops; exit 0' TERM; while [ ! -f /tmp/quit ]; do sleep 1; done; exit 3`, name)
}

// Native sidecars (init containers with restartPolicy Always, KEP-753), as
// the kubelet runs them: two sidecars start in order, the second holds the
// regular init container back until its startup probe passes, the app
// starts after the init container while both sidecars keep running, the pod
// is Ready; a sidecar that exits is restarted alone; on deletion the app
// stops first, then the sidecars in reverse order. A second pod with
// restartPolicy Never succeeds when its app exits: its sidecar does not
// keep it alive.
func TestSidecarContainers(t *testing.T) {
	n := startNode(t)
	hostDir := filepath.Join(n.root, "sidecar-host")
	n.writeManifest("sidecars.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: sidecars}
spec:
  terminationGracePeriodSeconds: 20
  initContainers:
  - name: logger
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", %[3]q]
    volumeMounts: [{name: host, mountPath: /host}]
  - name: proxy
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", %[4]q]
    startupProbe:
      exec: {command: ["cat", "/tmp/up"]}
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
    volumeMounts: [{name: host, mountPath: /host}]
  - name: setup
    image: %[1]s
    command: ["sh", "-c", "echo configured"]
  containers:
  - name: app
    image: %[1]s
    command: ["sh", "-c", %[5]q]
    volumeMounts: [{name: host, mountPath: /host}]
  volumes:
  - name: host
    hostPath: {path: %[2]s, type: DirectoryOrCreate}
`, busybox, hostDir, sidecarScript("logger"),
		"sleep 4; touch /tmp/up; "+sidecarScript("proxy"),
		"trap 'echo app >> /host/stops; exit 0' TERM; while sleep 1; do :; done"))
	n.writeManifest("finite.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: finite}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: helper
    image: %[1]s
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
  containers:
  - name: job
    image: %[1]s
    command: ["sh", "-c", "sleep 2; echo finished"]
`, busybox))

	pod := n.waitRunning("sidecars", 90*time.Second)
	checkSidecarStartOrder(t, pod)

	// A sidecar that exits is restarted; nothing else is.
	n.exec(pod, "logger", "touch", "/tmp/quit")
	waitFor(t, 60*time.Second, "the logger sidecar restarted", func() (bool, string) {
		pod = n.pod("sidecars")
		logger := findInitStatus(pod, "logger")
		return logger.RestartCount == 1 && logger.State.Running != nil, describe(pod)
	})
	if app := findStatus(pod, "app"); app.RestartCount != 0 || app.State.Running == nil {
		t.Errorf("the app was disturbed by the sidecar's restart: %+v", app)
	}
	if setup := findInitStatus(pod, "setup"); setup.RestartCount != 0 {
		t.Errorf("the regular init container ran again: %+v", setup)
	}

	waitFor(t, 60*time.Second, "the Never pod to succeed with its sidecar stopped", func() (bool, string) {
		p := n.pod("finite")
		if p == nil {
			return false, "no such pod"
		}
		helper := findInitStatus(p, "helper")
		return p.Status.Phase == v1.PodSucceeded && helper.State.Terminated != nil, describe(p)
	})

	// Deletion: the app first, then proxy (the later sidecar), then logger.
	n.removeManifest("sidecars.yaml")
	waitFor(t, 60*time.Second, "the sidecar pod removed", func() (bool, string) {
		uid := string(pod.UID)
		return n.pod("sidecars") == nil && len(n.containers(uid)) == 0 && len(n.sandboxes(uid)) == 0, "still there"
	})
	data, err := os.ReadFile(filepath.Join(hostDir, "stops"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(data)); strings.Join(got, " ") != "app proxy logger" {
		t.Errorf("stop order %q, want app, then proxy, then logger", got)
	}
}

// checkSidecarStartOrder checks a Running, Ready sidecar pod: logger, then
// proxy, then (once proxy's startup probe passed, 4 s later) setup, then the
// app, with both sidecars still running, started and ready.
func checkSidecarStartOrder(t *testing.T, pod *v1.Pod) {
	t.Helper()
	logger, proxy := findInitStatus(pod, "logger"), findInitStatus(pod, "proxy")
	setup, app := findInitStatus(pod, "setup"), findStatus(pod, "app")
	for _, cs := range []v1.ContainerStatus{logger, proxy} {
		if cs.State.Running == nil || cs.Started == nil || !*cs.Started || !cs.Ready {
			t.Fatalf("sidecar %q is not running, started and ready beside the app: %s", cs.Name, describe(pod))
		}
	}
	if setup.State.Terminated == nil || setup.State.Terminated.ExitCode != 0 || app.State.Running == nil {
		t.Fatalf("setup did not complete before the app ran: %s", describe(pod))
	}
	loggerAt, proxyAt := logger.State.Running.StartedAt.Time, proxy.State.Running.StartedAt.Time
	setupAt, setupDone := setup.State.Terminated.StartedAt.Time, setup.State.Terminated.FinishedAt.Time
	if proxyAt.Before(loggerAt) {
		t.Errorf("proxy started at %v, before logger at %v", proxyAt, loggerAt)
	}
	// Times are whole seconds: proxy's probe passes 4 s after its start.
	if setupAt.Sub(proxyAt) < 3*time.Second {
		t.Errorf("setup started at %v, %v after proxy: it did not wait for proxy's startup probe", setupAt, setupAt.Sub(proxyAt))
	}
	if app.State.Running.StartedAt.Time.Before(setupDone) {
		t.Errorf("app started at %v, before setup finished at %v", app.State.Running.StartedAt, setupDone)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodInitialized && c.Status != v1.ConditionTrue {
			t.Errorf("Initialized is %s: %s", c.Status, c.Message)
		}
	}
}
