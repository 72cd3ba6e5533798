package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Pods berth must not start are rejected at admission with the kubelet's
// reason and message (pkg/kubelet/lifecycle/predicate.go), or berth's own
// for a field it cannot honour, and never get a sandbox: a pod for another
// OS (spec.os), a pod labelled for another OS (kubernetes.io/os), and a pod
// asking for a user namespace on a runtime without them (the host's
// containerd 1.6, whatever runtime the run's other nodes manage). A Linux
// pod beside them runs.
func TestPodOSRejected(t *testing.T) {
	n := startNodeWithRuntime(t, "", "")
	const pod = `
apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {%s}
spec:
  %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
`
	for _, tc := range []struct{ name, labels, spec string }{
		{"windows", "", "os: {name: windows}"},
		{"windows-label", "kubernetes.io/os: windows", ""},
		{"userns", "", "hostUsers: false"},
		{"linux", "kubernetes.io/os: linux", "os: {name: linux}"},
	} {
		n.writeManifest(tc.name+".yaml", fmt.Sprintf(pod, tc.name, tc.labels, tc.spec, busybox))
	}
	n.waitRunning("linux", time.Minute)
	for _, tc := range []struct{ name, reason, message string }{
		{"windows", "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"},
		{"windows-label", "PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{"userns", "UnsupportedPodField", "spec.hostUsers: can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
	} {
		var p *v1.Pod
		waitFor(t, 30*time.Second, tc.name+" rejected with "+tc.reason, func() (bool, string) {
			p = n.pod(tc.name)
			return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == tc.reason &&
				strings.Contains(p.Status.Message, tc.message), describe(p)
		})
		if sbs := n.sandboxes(string(p.UID)); len(sbs) != 0 {
			t.Errorf("%s: a rejected pod got %d sandboxes", tc.name, len(sbs))
		}
		if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
			t.Errorf("%s: a rejected pod shows a running container: %s", tc.name, describe(p))
		}
	}
}

// An emptyDir, on disk or in memory, belongs to the pod's fsGroup with
// setgid and group rwx, as the kubelet's emptyDir SetUpAt makes it
// (volume.SetVolumeOwnership), and what a container creates in it inherits
// the group.
func TestFSGroupEmptyDir(t *testing.T) {
	n := startNode(t)
	n.writeManifest("fsg.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: fsg}
spec:
  restartPolicy: Never
  securityContext: {fsGroup: 1234, runAsUser: 1000}
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "touch /data/new /mem/new && stat -c '%%n %%g %%A' /data /mem /data/new /mem/new && id -G"]
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: mem, mountPath: /mem}
  volumes:
  - name: data
    emptyDir: {}
  - name: mem
    emptyDir: {medium: Memory}
`, busybox))
	waitFor(t, time.Minute, "fsg to succeed", func() (bool, string) {
		p := n.pod("fsg")
		return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
	})
	out, err := n.berth("logs", "fsg-"+nodeName)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"/data 1234 drwxrwsrwx",
		"/mem 1234 drwxrwsrwt",
		"/data/new 1234 ",
		"/mem/new 1234 ",
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("log:\n%s\nwant %d stat lines and id -G", out, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("stat line %d = %q, want %q...", i, lines[i], w)
		}
	}
	if groups := strings.Fields(lines[len(want)]); !slices.Contains(groups, "1234") {
		t.Errorf("id -G = %q: the fsGroup is not among the container's groups", lines[len(want)])
	}
}

// A pod past its activeDeadlineSeconds is stopped for good as by the
// kubelet's activeDeadlineHandler: Failed, reason DeadlineExceeded, its
// container killed (not restarted), and it stays so.
func TestActiveDeadline(t *testing.T) {
	n := startNode(t)
	n.writeManifest("deadline.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
`, busybox))
	var p *v1.Pod
	waitFor(t, 60*time.Second, "the pod stopped for its deadline", func() (bool, string) {
		p = n.pod("deadline")
		if p == nil || p.Status.Phase != v1.PodFailed {
			return false, describe(p)
		}
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil, describe(p)
	})
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("status %q: %q, want the kubelet's DeadlineExceeded", p.Status.Reason, p.Status.Message)
	}
	if took := p.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Sub(p.Status.StartTime.Time); took < 3*time.Second {
		t.Errorf("stopped %v after its start, before its 3 s deadline", took)
	}
	time.Sleep(3 * time.Second) // a restart would show by now
	if p = n.pod("deadline"); p.Status.Phase != v1.PodFailed || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod did not stay stopped: %s", describe(p))
	}
}

// A pod being deleted is unready while its container still runs its
// SIGTERM handler (the upstream spec "should mark readiness on pods to false
// while pod is in progress of terminating").
func TestUnreadyWhileTerminating(t *testing.T) {
	n := startNode(t)
	n.writeManifest("draining.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: draining}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "touch /tmp/ready; trap 'rm -f /tmp/ready; sleep 15; exit 0' TERM; while sleep 1; do :; done"]
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 1
      failureThreshold: 1
`, busybox))
	n.waitRunning("draining", time.Minute)
	n.removeManifest("draining.yaml")
	waitFor(t, 12*time.Second, "the draining pod unready while its container still runs", func() (bool, string) {
		var p *v1.Pod
		for _, q := range n.pods() {
			if q.Name == "draining-"+nodeName && q.DeletionTimestamp != nil {
				p = &q
			}
		}
		if p == nil {
			return false, "not shown as terminating"
		}
		running := len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		return running && !podReady(p), describe(p)
	})
}
