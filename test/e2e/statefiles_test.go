package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// readyProber is a pod whose readiness probe passes, so that berth keeps
// its result in probes/state.json.
func readyProber(name string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`, name, busybox)
}

// probeState is the probe results file of n.
func (n *node) probeState() string { return filepath.Join(n.root, "probes", "state.json") }

// waitRegularFile waits until berth has written path as a regular file.
func (n *node) waitRegularFile(path string) {
	n.t.Helper()
	waitFor(n.t, 30*time.Second, path+" written", func() (bool, string) {
		st, err := os.Lstat(path)
		if err != nil {
			return false, err.Error()
		}
		return st.Mode().IsRegular(), st.Mode().String()
	})
}

// waitNodeEvent waits for a node event of reason whose message holds every
// one of contains.
func (n *node) waitNodeEvent(reason string, contains ...string) v1.Event {
	n.t.Helper()
	var found v1.Event
	waitFor(n.t, 30*time.Second, fmt.Sprintf("a %s node event containing %q", reason, contains), func() (bool, string) {
		var seen []string
		for _, e := range n.nodeEvents() {
			if e.Reason != reason {
				seen = append(seen, e.Reason)
				continue
			}
			all := true
			for _, c := range contains {
				all = all && strings.Contains(e.Message, c)
			}
			if all {
				found = e
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "; ")
	})
	return found
}

// setAside lists what was moved aside from path (path.corrupt-*).
func setAside(t *testing.T, path string) []string {
	t.Helper()
	moved, err := filepath.Glob(path + ".corrupt*")
	if err != nil {
		t.Fatal(err)
	}
	return moved
}

// A directory where probes/state.json belongs does not stop berth: it
// starts, the directory is moved aside and reported as a node event, the
// pods run and become ready, and the state is saved again.
func TestStateFileProbeStateDirectory(t *testing.T) {
	n := startNode(t)
	n.writeManifest("ready.yaml", readyProber("ready"))
	before := n.waitRunning("ready", 60*time.Second)
	n.waitRegularFile(n.probeState())

	n.kill9()
	if err := os.Remove(n.probeState()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(n.probeState(), "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	n.start()

	after := n.waitRunning("ready", 60*time.Second)
	if after.UID != before.UID || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod was replaced or restarted: %s -> %s, %s", before.UID, after.UID, describe(after))
	}
	moved := setAside(t, n.probeState())
	if len(moved) != 1 {
		t.Fatalf("set aside: %v, want the directory", moved)
	}
	if _, err := os.Stat(filepath.Join(moved[0], "inside")); err != nil {
		t.Errorf("the directory was not moved whole to %s: %v", moved[0], err)
	}
	n.waitNodeEvent("ProbeStateCorrupt", n.probeState(), "directory", "moved to "+moved[0])
	n.waitRegularFile(n.probeState())
}

// A file where the probes directory belongs does not stop berth either:
// it is moved aside and reported, and the state saved again.
func TestStateFileProbeDirectoryIsAFile(t *testing.T) {
	n := startNode(t)
	n.writeManifest("ready.yaml", readyProber("ready"))
	n.waitRunning("ready", 60*time.Second)
	n.waitRegularFile(n.probeState())

	n.kill9()
	dir := filepath.Dir(n.probeState())
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.start()
	n.waitRunning("ready", 60*time.Second)
	moved := setAside(t, dir)
	if len(moved) != 1 {
		t.Fatalf("set aside: %v, want the file", moved)
	}
	n.waitNodeEvent("ProbeStateCorrupt", dir, "moved to "+moved[0])
	n.waitRegularFile(n.probeState())
}

// A probe state file corrupted twice keeps both copies: the second is not
// written over the first.
func TestStateFileProbeStateCorruptTwice(t *testing.T) {
	n := startNode(t)
	n.writeManifest("ready.yaml", readyProber("ready"))
	n.waitRunning("ready", 60*time.Second)
	n.waitRegularFile(n.probeState())

	contents := []string{"first garbage", "second garbage"}
	for i, garbage := range contents {
		n.kill9()
		if err := os.WriteFile(n.probeState(), []byte(garbage), 0o600); err != nil {
			t.Fatal(err)
		}
		n.start()
		n.waitRunning("ready", 60*time.Second)
		// Read before the API answers; waited for all the same.
		waitFor(t, 30*time.Second, fmt.Sprintf("%d files set aside", i+1), func() (bool, string) {
			moved := setAside(t, n.probeState())
			return len(moved) == i+1, strings.Join(moved, ", ")
		})
	}
	n.waitNodeEvent("ProbeStateCorrupt", n.probeState(), "moved to "+n.probeState()+".corrupt-")
	moved := setAside(t, n.probeState())
	var kept []string
	for _, m := range moved {
		data, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, string(data))
	}
	if strings.Join(kept, ",") != strings.Join(contents, ",") {
		t.Errorf("set-aside files %v hold %q, want %q", moved, kept, contents)
	}
}

// A directory, a fifo or a dangling symlink named as a record of an
// evicted pod is moved aside and reported as a node event, not skipped
// without a word; berth starts.
func TestStateFileTerminalRecordWrongTypes(t *testing.T) {
	n := startNode(t)
	n.kill9()
	dir := filepath.Join(n.root, "terminal-pods")
	paths := map[string]string{
		"directory":     filepath.Join(dir, "4f7a2c3e-0000-4000-8000-000000000001.json"),
		"named pipe":    filepath.Join(dir, "4f7a2c3e-0000-4000-8000-000000000002.json"),
		"symbolic link": filepath.Join(dir, "4f7a2c3e-0000-4000-8000-000000000003.json"),
	}
	if err := os.MkdirAll(paths["directory"], 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(paths["named pipe"], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere", paths["symbolic link"]); err != nil {
		t.Fatal(err)
	}
	n.start()
	for kind, path := range paths {
		moved := setAside(t, path)
		if len(moved) != 1 {
			t.Errorf("%s: set aside %v, want one", path, moved)
			continue
		}
		n.waitNodeEvent("TerminalPodRecordCorrupt", path, kind, "moved to "+moved[0])
	}
	// berth runs pods as usual.
	n.writeManifest("web.yaml", sleeper("web", "x"))
	n.waitRunning("web", 60*time.Second)
}

// Files where the directories of the evicted pods' records and of the
// applied pods belong do not stop berth: they are moved aside and
// reported, and both stores work.
func TestStateFileStoreDirectoriesAreFiles(t *testing.T) {
	n := startNode(t)
	n.kill9()
	terminal, local := filepath.Join(n.root, "terminal-pods"), filepath.Join(n.root, "local-pods")
	for _, dir := range []string{terminal, local} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n.start()
	for _, dir := range []string{terminal, local} {
		if moved := setAside(t, dir); len(moved) != 1 {
			t.Errorf("%s: set aside %v, want the file", dir, moved)
		}
	}
	n.waitNodeEvent("TerminalPodRecordCorrupt", terminal+": not a directory; moved to "+terminal+".corrupt-")
	if log := n.berthLog(); !strings.Contains(log, "the local pod store's directory was not a directory") {
		t.Errorf("the log does not report the local pod store's directory")
	}
	if out, err := n.apply(sleeper("web", "x")); err != nil {
		t.Fatalf("berth apply = %q, %v", out, err)
	}
	n.waitAPIRunning("web", "", 60*time.Second)
}

// startFails runs berth on n's root dir, with extra flags that make it
// fail part-way through its start-up, and returns its output: berth must
// exit with an error, of its own accord.
func (n *node) startFails(extra ...string) string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"run",
		"--root-dir", n.root,
		"--pod-manifest-path", n.manifests,
		"--pod-logs-dir", n.podLogs,
		"--node-name", nodeName,
		"--read-only-port", strconv.Itoa(n.port),
		"--pod-cidr", n.cidr,
		"--cni-bridge", n.bridge,
		"--pause-binary", filepath.Join(bins, "berth-pause"),
		"--log-level", "debug",
		"--cgroup-root", n.cgroupRoot,
		"--device-plugin-dir", n.devicePlugins,
		"--pod-resources-dir", n.podResources,
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bins, "berth"), append(args, extra...)...).CombinedOutput()
	if ctx.Err() != nil || err == nil {
		n.t.Fatalf("berth was meant to fail its start (%v, %v):\n%s", err, ctx.Err(), out)
	}
	return string(out)
}

// A pod applied through the admin socket whose file a start quarantined is
// still reported (Failed, naming the file and where it went) by the next
// start, even when the start that moved it aside failed: it does not
// vanish. It stays reported across restarts until it is deleted, and its
// pod is stopped and its pod dir removed.
func TestStateFileQuarantinedPodSurvivesFailedStart(t *testing.T) {
	n := startNode(t)
	if out, err := n.apply(sleeper("good", "x") + "---\n" + sleeper("victim", "x")); err != nil {
		t.Fatalf("berth apply = %q, %v", out, err)
	}
	good := n.waitAPIRunning("good", "", 60*time.Second)
	victim := n.waitAPIRunning("victim", "", 60*time.Second)

	n.kill9()
	file := filepath.Join(n.root, "local-pods", "default_victim.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	// A file where the device plugin directory belongs stops this start
	// after the applied pods were read (and the victim's file set aside).
	blocker := filepath.Join(n.root, "not-a-directory")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := n.startFails("--device-plugin-dir", blocker)
	if !strings.Contains(out, "quarantining it") {
		t.Fatalf("the failed start did not get to quarantine the file:\n%s", out)
	}
	if moved := setAside(t, file); len(moved) != 1 {
		t.Fatalf("set aside by the failed start: %v, want one", moved)
	}

	for round := range 2 {
		n.start()
		failed := n.waitQuarantined("victim", file)
		if round == 0 {
			if again := n.waitAPIRunning("good", "", 60*time.Second); again.UID != good.UID {
				t.Errorf("the intact pod was replaced: %s -> %s", good.UID, again.UID)
			}
			n.waitRuntimeGone(string(victim.UID))
			waitFor(t, 30*time.Second, "the victim's pod dir removed", func() (bool, string) {
				_, err := os.Stat(filepath.Join(n.root, "pods", string(victim.UID)))
				return os.IsNotExist(err), fmt.Sprint(err)
			})
		}
		if out, err := n.berth("pods", "--server", n.url("")); err != nil || !strings.Contains(out, "victim") {
			t.Errorf("round %d: berth pods does not show the quarantined pod: %q, %v", round, out, err)
		}
		t.Logf("round %d: %s", round, failed.Status.Message)
		n.kill9()
	}

	// Deleting the name forgets it for good: a restart does not bring the
	// report back, and the evidence stays.
	n.start()
	n.waitQuarantined("victim", file)
	if out, err := n.berth("delete", "pod", "victim", "--root-dir", n.root); err != nil {
		t.Fatalf("deleting the quarantined pod = %q, %v", out, err)
	}
	waitFor(t, 30*time.Second, "the report gone", func() (bool, string) {
		p := n.apiPod("victim")
		return p == nil, describe(p)
	})
	n.kill9()
	n.start()
	n.waitAPIRunning("good", "", 60*time.Second)
	time.Sleep(2 * time.Second) // the store is read before the API answers; a margin all the same
	if p := n.apiPod("victim"); p != nil {
		t.Errorf("a deleted quarantined pod came back after a restart: %s", describe(p))
	}
	if moved, _ := filepath.Glob(file + ".corrupt-*"); len(moved) != 1 {
		t.Errorf("evidence: %v, want the set-aside file kept", moved)
	}
}

// waitQuarantined waits until /pods shows the applied pod name Failed,
// naming its file and where the file was moved.
func (n *node) waitQuarantined(name, file string) *v1.Pod {
	n.t.Helper()
	var failed *v1.Pod
	waitFor(n.t, 30*time.Second, name+" reported as quarantined", func() (bool, string) {
		failed = n.apiPod(name)
		return failed != nil && failed.Status.Phase == v1.PodFailed &&
			strings.Contains(failed.Status.Message, file) &&
			strings.Contains(failed.Status.Message, "quarantined as "+file+".corrupt-"), describe(failed)
	})
	return failed
}

// Two unreadable manifests of one stem, web.yaml and web.json, are two
// Failed pods, each named after and naming its own file, not one.
func TestStateFileUnparsableManifestsOfOneStem(t *testing.T) {
	n := startNode(t)
	n.writeManifest("good.yaml", sleeper("good", "x"))
	n.writeManifest("web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [\n")
	n.writeManifest("web.json", `{"apiVersion": "v1", "kind": "Pod", "metadata": [`)
	n.waitRunning("good", 60*time.Second)

	var names []string
	waitFor(t, 30*time.Second, "two invalid manifests in /pods", func() (bool, string) {
		names = nil
		for _, p := range n.pods() {
			if p.Status.Reason == "InvalidManifest" {
				names = append(names, p.Name+" "+p.Annotations["berth.dev/manifest-path"])
			}
		}
		return len(names) == 2, strings.Join(names, ", ")
	})
	want := map[string]bool{
		"web.json-" + nodeName + " " + filepath.Join(n.manifests, "web.json"): true,
		"web.yaml-" + nodeName + " " + filepath.Join(n.manifests, "web.yaml"): true,
	}
	for _, got := range names {
		if !want[got] {
			t.Errorf("invalid manifest pod %q; want one of %v", got, want)
		}
		delete(want, got)
	}
	out, err := n.berth("pods")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web.json-" + nodeName, "web.yaml-" + nodeName} {
		if !strings.Contains(out, name) {
			t.Errorf("berth pods does not show %s:\n%s", name, out)
		}
	}
}
