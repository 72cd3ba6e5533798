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

// sleeper is a pod whose containers stop promptly on SIGTERM.
func sleeper(name, env string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    env: [{name: VERSION, value: %q}]
`, name, busybox, env)
}

// A crashing container is restarted with the kubelet's growing back-off
// (10 s, then 20 s), shows CrashLoopBackOff while it waits, keeps its last
// termination (exit code and termination message), and its previous logs.
func TestCrashLoopBackOff(t *testing.T) {
	n := startNode(t)
	n.writeManifest("crash.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo run at $(date +%%s); echo boom > /dev/termination-log; exit 3"]
`, busybox))

	// Record each instance's start and finish from lastState, by restart count.
	type run struct{ started, finished time.Time }
	runs := map[int32]run{}
	sawBackOff := false
	var pod *v1.Pod
	waitFor(t, 3*time.Minute, "three restarts", func() (bool, string) {
		pod = n.pod("crash")
		if pod == nil || len(pod.Status.ContainerStatuses) == 0 {
			return false, "no status yet"
		}
		cs := pod.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
			if !strings.Contains(w.Message, "back-off") {
				t.Errorf("CrashLoopBackOff message %q", w.Message)
			}
		}
		// While the container waits to be restarted, lastState is the
		// instance that just exited (number RestartCount); once it runs
		// again, lastState is the one before it.
		switch last := cs.LastTerminationState.Terminated; {
		case cs.State.Terminated != nil:
			runs[cs.RestartCount] = run{cs.State.Terminated.StartedAt.Time, cs.State.Terminated.FinishedAt.Time}
		case last != nil && cs.State.Waiting != nil:
			runs[cs.RestartCount] = run{last.StartedAt.Time, last.FinishedAt.Time}
		case last != nil && cs.State.Running != nil && cs.RestartCount > 0:
			runs[cs.RestartCount-1] = run{last.StartedAt.Time, last.FinishedAt.Time}
		}
		_, ok := runs[3]
		return ok, describe(pod)
	})
	if !sawBackOff {
		t.Error("never saw the CrashLoopBackOff waiting reason")
	}
	// Run 0 is replaced at once (the first restart has no back-off), so
	// polling may miss it; the gaps below need runs 1 to 3.
	for i := int32(1); i <= 3; i++ {
		if _, ok := runs[i]; !ok {
			t.Fatalf("missed run %d: %v", i, runs)
		}
	}
	// Restart 1 is immediate; 2 waits 10 s; 3 waits 20 s. Timestamps are
	// whole seconds, hence the 1 s slack; a slow machine only adds delay.
	gap := func(i int32) time.Duration { return runs[i].started.Sub(runs[i-1].finished) }
	if gap(2) < 9*time.Second {
		t.Errorf("second restart after %s, want >= 10s back-off", gap(2))
	}
	if gap(3) < 19*time.Second || gap(3) <= gap(2) {
		t.Errorf("third restart after %s (second after %s): the back-off must double to 20s", gap(3), gap(2))
	}

	cs := pod.Status.ContainerStatuses[0]
	last := cs.LastTerminationState.Terminated
	if cs.State.Terminated != nil {
		last = cs.State.Terminated
	}
	if last == nil || last.ExitCode != 3 || last.Reason != "Error" || last.Message != "boom\n" {
		t.Errorf("last termination = %+v, want exit 3, reason Error, message boom", last)
	}
	if pod.Status.Phase != v1.PodRunning {
		t.Errorf("a crash-looping pod with restartPolicy Always is Running, got %s", pod.Status.Phase)
	}
	out, err := n.berth("logs", "crash-"+nodeName, "--previous")
	if err != nil || !strings.Contains(out, "run at ") {
		t.Errorf("berth logs --previous: %q, %v", out, err)
	}
}

// Editing a manifest replaces the pod: the old pod's containers and sandbox
// are removed and a new pod (new UID) runs the new spec.
func TestEditReplacesPod(t *testing.T) {
	n := startNode(t)
	n.writeManifest("edit.yaml", sleeper("edit", "one"))
	old := n.waitRunning("edit", 60*time.Second)
	n.writeManifest("edit.yaml", sleeper("edit", "two"))
	var cur *v1.Pod
	waitFor(t, 60*time.Second, "the edited pod to run", func() (bool, string) {
		cur = n.pod("edit")
		if cur == nil || cur.UID == old.UID {
			return false, "still the old pod"
		}
		return cur.Status.Phase == v1.PodRunning && podReady(cur), describe(cur)
	})
	if got := strings.TrimSpace(n.exec(cur, "main", "sh", "-c", "echo $VERSION")); got != "two" {
		t.Errorf("the new pod runs the old spec: VERSION=%s", got)
	}
	waitFor(t, 30*time.Second, "the old pod's containers and sandbox to be removed", func() (bool, string) {
		cs, sbs := n.containers(string(old.UID)), n.sandboxes(string(old.UID))
		return len(cs) == 0 && len(sbs) == 0, fmt.Sprintf("%d containers, %d sandboxes", len(cs), len(sbs))
	})
}

// Deleting a manifest stops the pod and removes its containers, sandbox,
// volumes and logs.
func TestDeleteRemovesPod(t *testing.T) {
	n := startNode(t)
	n.writeManifest("gone.yaml", sleeper("gone", "x"))
	pod := n.waitRunning("gone", 60*time.Second)
	n.removeManifest("gone.yaml")
	waitFor(t, 30*time.Second, "the pod to be removed", func() (bool, string) {
		cs, sbs := n.containers(string(pod.UID)), n.sandboxes(string(pod.UID))
		for _, p := range n.pods() {
			if p.UID == pod.UID {
				return false, "still in /pods: " + describe(&p)
			}
		}
		return len(cs) == 0 && len(sbs) == 0, fmt.Sprintf("%d containers, %d sandboxes", len(cs), len(sbs))
	})
	for _, dir := range []string{
		filepath.Join(n.root, "pods", string(pod.UID)),
		filepath.Join(n.podLogs, "default_gone-"+nodeName+"_"+string(pod.UID)),
	} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is left behind (%v)", dir, err)
		}
	}
}

// Restarting berth, gracefully or with kill -9, re-adopts the running pods
// from their CRI labels: no container is restarted or duplicated and restart
// counts are kept. A manifest deleted while berth was down is removed.
func TestRestartAdoptsPods(t *testing.T) {
	n := startNode(t)
	n.writeManifest("keep.yaml", sleeper("keep", "x"))
	n.writeManifest("drop.yaml", sleeper("drop", "x"))
	keep := n.waitRunning("keep", 60*time.Second)
	drop := n.waitRunning("drop", 60*time.Second)
	ids := func(uid string) []string {
		var out []string
		for _, c := range n.containers(uid) {
			out = append(out, c.Id+"/"+c.State.String())
		}
		return out
	}
	before := ids(string(keep.UID))

	for _, crash := range []bool{false, true} {
		if crash {
			n.kill9()
		} else {
			n.stop()
		}
		if crash {
			// Delete a manifest while berth is down.
			n.removeManifest("drop.yaml")
		}
		n.start()
		again := n.waitRunning("keep", 60*time.Second)
		if again.UID != keep.UID {
			t.Fatalf("the pod's UID changed across a restart: %s -> %s", keep.UID, again.UID)
		}
		// Give berth a few relists to do anything wrong.
		time.Sleep(3 * time.Second)
		if after := ids(string(keep.UID)); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Fatalf("containers changed across a restart (crash=%v): %v -> %v", crash, before, after)
		}
		if rc := n.pod("keep").Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("restart count after a berth restart = %d", rc)
		}
	}
	waitFor(t, 30*time.Second, "the pod deleted while berth was down to be removed", func() (bool, string) {
		cs, sbs := n.containers(string(drop.UID)), n.sandboxes(string(drop.UID))
		return len(cs) == 0 && len(sbs) == 0, fmt.Sprintf("%d containers, %d sandboxes", len(cs), len(sbs))
	})
}

// A broken manifest is reported, with its file and the reason, as a Failed
// pod in the API and in `berth pods`, while the other pods run.
func TestBrokenManifestDoesNotStopOthers(t *testing.T) {
	n := startNode(t)
	n.writeManifest("good.yaml", sleeper("good", "x"))
	n.writeManifest("dup.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: dup}
spec:
  containers:
  - {name: a, image: %[1]s}
  - {name: a, image: %[1]s}
`, busybox))
	n.writeManifest("garbage.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
	n.writeManifest("deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")
	n.waitRunning("good", 60*time.Second)

	var failed []v1.Pod
	waitFor(t, 30*time.Second, "three invalid manifests in /pods", func() (bool, string) {
		failed = nil
		for _, p := range n.pods() {
			if p.Status.Reason == "InvalidManifest" {
				failed = append(failed, p)
			}
		}
		return len(failed) == 3, fmt.Sprintf("%d invalid", len(failed))
	})
	msgs := ""
	for _, p := range failed {
		if p.Status.Phase != v1.PodFailed {
			t.Errorf("invalid manifest pod %s has phase %s", p.Name, p.Status.Phase)
		}
		msgs += p.Status.Message + "\n"
	}
	for _, want := range []string{
		filepath.Join(n.manifests, "dup.yaml"),
		"spec.containers[1].name",
		filepath.Join(n.manifests, "garbage.yaml"),
		filepath.Join(n.manifests, "deploy.yaml"),
		"Deployment",
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("the errors do not mention %q:\n%s", want, msgs)
		}
	}
	out, err := n.berth("pods")
	if err != nil {
		t.Fatalf("berth pods: %v", err)
	}
	if !strings.Contains(out, "good-"+nodeName) || !strings.Contains(out, "Running") || strings.Count(out, "InvalidManifest") != 3 {
		t.Errorf("berth pods does not show the good pod running and the three invalid manifests:\n%s", out)
	}
}

// A manifest deleted and put back unchanged while its pod is still being
// killed (same content, so the same UID) brings the pod back once the kill
// is done.
func TestRestoredManifestRevivesPod(t *testing.T) {
	n := startNode(t)
	// The container ignores SIGTERM, so the kill takes the grace period.
	manifest := fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: phoenix}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap '' TERM; while sleep 1; do :; done"]
`, busybox)
	n.writeManifest("phoenix.yaml", manifest)
	first := n.waitRunning("phoenix", time.Minute)
	firstID := containerID(t, first, "main")
	n.removeManifest("phoenix.yaml")
	waitFor(t, 30*time.Second, "the pod to be terminating", func() (bool, string) {
		for _, p := range n.pods() {
			if p.UID == first.UID && p.DeletionTimestamp != nil {
				return true, ""
			}
		}
		return false, "not terminating"
	})
	n.writeManifest("phoenix.yaml", manifest)
	var again *v1.Pod
	waitFor(t, time.Minute, "the pod to run again in a new container", func() (bool, string) {
		again = n.pod("phoenix")
		if again == nil || again.Status.Phase != v1.PodRunning || !podReady(again) {
			return false, describe(again)
		}
		return containerID(t, again, "main") != firstID, "still the first container"
	})
	if again.UID != first.UID {
		t.Errorf("same manifest, different UID: %s -> %s", first.UID, again.UID)
	}
}
