package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A container's own restartPolicy and restartPolicyRules (KEP-5307,
// ContainerRestartRules, on since 1.35) decide its restarts, not the pod's
// restartPolicy. In a pod that never restarts, a container whose rule lists
// exit code 42 is restarted after exiting 42 (its second run keeps running:
// the first leaves a mark in an emptyDir), and its neighbour with the same
// rule that exits 3 is not. In a pod that always restarts, a container of
// its own policy Never that exits 3 stays down and the pod is Failed, as
// the kubelet computes the phase.
func TestContainerRestartRules(t *testing.T) {
	n := startNodeKeepingImages(t)
	const rules = `
    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes: {operator: In, values: [42]}`
	out, err := n.apply(`apiVersion: v1
kind: Pod
metadata: {name: rules}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: listed
    image: ` + busybox + `
    command: ["sh", "-c", "if [ -e /mark/ran ]; then exec sleep 3600; fi; touch /mark/ran; exit 42"]
    volumeMounts: [{name: mark, mountPath: /mark}]` + rules + `
  - name: other
    image: ` + busybox + `
    command: ["sh", "-c", "exit 3"]` + rules + `
  volumes: [{name: mark, emptyDir: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: own-never}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
  - name: once
    image: ` + busybox + `
    command: ["sh", "-c", "exit 3"]
    restartPolicy: Never
`)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	var pod *v1.Pod
	waitFor(t, 2*time.Minute, "listed restarted once after exit 42 and running", func() (bool, string) {
		pod = n.apiPod("rules")
		if pod == nil {
			return false, "no pod"
		}
		cs := findStatus(pod, "listed")
		last := cs.LastTerminationState.Terminated
		return cs.State.Running != nil && cs.RestartCount == 1 && last != nil && last.ExitCode == 42, describe(pod)
	})
	other := findStatus(pod, "other")
	if term := other.State.Terminated; term == nil || term.ExitCode != 3 || other.RestartCount != 0 {
		t.Errorf("other (exit 3, not listed) was restarted or is not terminated with 3: %s", describe(pod))
	}
	if pod.Status.Phase != v1.PodRunning {
		t.Errorf("rules pod phase %s, want Running: %s", pod.Status.Phase, describe(pod))
	}
	uid := string(pod.UID)
	var others int
	for _, c := range n.containers(uid) {
		if c.Metadata.Name == "other" {
			others++
		}
	}
	if others != 1 {
		t.Errorf("runtime has %d containers named other, want 1 (never restarted)", others)
	}

	waitFor(t, 2*time.Minute, "own-never Failed", func() (bool, string) {
		p := n.apiPod("own-never")
		return p != nil && p.Status.Phase == v1.PodFailed, describe(p)
	})
	p := n.apiPod("own-never")
	once := findStatus(p, "once")
	if term := once.State.Terminated; term == nil || term.ExitCode != 3 || once.RestartCount != 0 {
		t.Errorf("once (own policy Never in a pod Always) restarted or not terminated with 3: %s", describe(p))
	}
	if p.Status.Reason != "" {
		t.Errorf("own-never reason %q, want none (not refused): %s", p.Status.Reason, describe(p))
	}
}

// startNodeKeepingImages starts a node whose image GC never runs and whose
// disk-pressure eviction only acts on a full disk: on the shared test
// machine the disk may be past GC's 85% and eviction's 10% free, and the
// busybox image or the test's pods would go before they start.
func startNodeKeepingImages(t *testing.T) *node {
	t.Helper()
	return startNode(t, "--config", keepImagesConfig(t))
}

// keepImagesConfig is startNodeKeepingImages's configuration file.
func keepImagesConfig(t *testing.T) string {
	t.Helper()
	return writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 1Mi, nodefs.available: 1Mi, imagefs.available: 1Mi, nodefs.inodesFree: 1%}
`)
}
