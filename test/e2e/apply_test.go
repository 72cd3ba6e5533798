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

// apply runs `berth apply -f` on a file holding content.
func (n *node) apply(content string) (string, error) {
	n.t.Helper()
	path := filepath.Join(n.t.TempDir(), "pods.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		n.t.Fatal(err)
	}
	return n.berth("apply", "-f", path, "--root-dir", n.root)
}

// apiPod returns the pod named name in namespace default as /pods shows
// it, or nil: pods from berth apply keep their name.
func (n *node) apiPod(name string) *v1.Pod {
	for _, p := range n.pods() {
		if p.Namespace == "default" && p.Name == name && p.DeletionTimestamp == nil {
			return &p
		}
	}
	return nil
}

// waitAPIRunning waits until the applied pod runs, ready, with a UID other
// than notUID.
func (n *node) waitAPIRunning(name, notUID string, timeout time.Duration) *v1.Pod {
	n.t.Helper()
	var pod *v1.Pod
	waitFor(n.t, timeout, name+" running and ready", func() (bool, string) {
		pod = n.apiPod(name)
		switch {
		case pod == nil:
			return false, "no such pod"
		case string(pod.UID) == notUID:
			return false, "still the old pod " + notUID
		}
		return pod.Status.Phase == v1.PodRunning && podReady(pod), describe(pod)
	})
	return pod
}

// containerIDs lists the pod's containers and sandboxes, with their state.
func (n *node) containerIDs(uid string) string {
	var out []string
	for _, sb := range n.sandboxes(uid) {
		out = append(out, "sandbox "+sb.Id+"/"+sb.State.String())
	}
	for _, c := range n.containers(uid) {
		out = append(out, c.Id+"/"+c.State.String())
	}
	return strings.Join(out, ",")
}

func (n *node) waitRuntimeGone(uid string) {
	n.t.Helper()
	waitFor(n.t, 30*time.Second, "pod "+uid+" gone from the runtime", func() (bool, string) {
		cs, sbs := n.containers(uid), n.sandboxes(uid)
		return len(cs) == 0 && len(sbs) == 0, fmt.Sprintf("%d containers, %d sandboxes", len(cs), len(sbs))
	})
}

// A pod applied through the admin socket runs as an API-server pod, is
// left alone when applied again unchanged, is replaced when changed,
// survives kill -9 of berth without a restart, and is gone once deleted.
// Static pods' names and static pods themselves are out of its reach.
func TestApplyLifecycle(t *testing.T) {
	n := startNode(t)

	out, err := n.apply(sleeper("web", "one"))
	if err != nil || out != "pod/web created\n" {
		t.Fatalf("berth apply = %q, %v", out, err)
	}
	first := n.waitAPIRunning("web", "", 60*time.Second)
	if src := first.Annotations["kubernetes.io/config.source"]; src != "api" {
		t.Errorf("config.source %q, want api", src)
	}
	if first.Spec.NodeName != nodeName {
		t.Errorf("nodeName %q", first.Spec.NodeName)
	}
	if st, err := os.Stat(filepath.Join(n.root, "berth.sock")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("admin socket: %v, %v; want mode 0600", st.Mode(), err)
	}

	out, err = n.apply(sleeper("web", "one"))
	if err != nil || out != "pod/web unchanged\n" {
		t.Errorf("applying the same pod = %q, %v", out, err)
	}
	if p := n.apiPod("web"); p == nil || p.UID != first.UID {
		t.Errorf("an unchanged apply replaced the pod: %v", p)
	}

	out, err = n.apply(sleeper("web", "two"))
	if err != nil || out != "pod/web configured\n" {
		t.Fatalf("applying a changed pod = %q, %v", out, err)
	}
	cur := n.waitAPIRunning("web", string(first.UID), 60*time.Second)
	if got := strings.TrimSpace(n.exec(cur, "main", "sh", "-c", "echo $VERSION")); got != "two" {
		t.Errorf("the new pod runs the old spec: VERSION=%s", got)
	}
	n.waitRuntimeGone(string(first.UID))

	// kill -9: the restarted berth reads the pod from its store and adopts
	// the running containers.
	before := n.containerIDs(string(cur.UID))
	n.kill9()
	n.start()
	again := n.waitAPIRunning("web", "", 60*time.Second)
	if again.UID != cur.UID {
		t.Fatalf("the pod's UID changed across kill -9: %s -> %s", cur.UID, again.UID)
	}
	// Give berth a few relists to do anything wrong.
	time.Sleep(3 * time.Second)
	if after := n.containerIDs(string(cur.UID)); after != before {
		t.Errorf("containers changed across kill -9:\n%s\n%s", before, after)
	}
	if rc := n.apiPod("web").Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("restart count after kill -9 = %d", rc)
	}
	out, err = n.apply(sleeper("web", "two"))
	if err != nil || out != "pod/web unchanged\n" {
		t.Errorf("applying the same pod after a restart = %q, %v", out, err)
	}

	// A static pod's name is the manifest's: neither applied over nor deleted.
	n.writeManifest("stat.yaml", sleeper("stat", "x"))
	n.waitRunning("stat", 60*time.Second)
	static := "stat-" + nodeName
	if _, err := n.apply(sleeper(static, "x")); err == nil || !strings.Contains(err.Error(), "static pod default/"+static) {
		t.Errorf("applying a static pod's name: %v", err)
	}
	if _, err := n.berth("delete", "pod", static, "--root-dir", n.root); err == nil || !strings.Contains(err.Error(), "delete its manifest instead") {
		t.Errorf("deleting a static pod: %v", err)
	}

	out, err = n.berth("delete", "pod", "web", "--root-dir", n.root)
	if err != nil || out != "pod \"web\" deleted\n" {
		t.Fatalf("berth delete pod web = %q, %v", out, err)
	}
	n.waitRuntimeGone(string(cur.UID))
	waitFor(t, 30*time.Second, "web gone from /pods", func() (bool, string) {
		p := n.apiPod("web")
		return p == nil, describe(p)
	})
	if _, err := n.berth("delete", "pod", "web", "--root-dir", n.root); err == nil || !strings.Contains(err.Error(), `pods "web" not found`) {
		t.Errorf("deleting it again: %v", err)
	}
	if p := n.pod("stat"); p == nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("the static pod was disturbed: %s", describe(p))
	}
}

// A store file that fails verification at start is quarantined and shown as
// a Failed pod, and its pod is not trusted (stopped), while another applied
// pod is adopted and runs on.
func TestApplyCorruptStoreFile(t *testing.T) {
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
	// Half a file, as a disk that lost a write would leave it.
	if err := os.WriteFile(file, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	n.start()

	if again := n.waitAPIRunning("good", "", 60*time.Second); again.UID != good.UID {
		t.Errorf("the intact pod was replaced: %s -> %s", good.UID, again.UID)
	}
	var failed *v1.Pod
	waitFor(t, 30*time.Second, "the corrupt pod reported as Failed", func() (bool, string) {
		failed = n.apiPod("victim")
		return failed != nil && failed.Status.Phase == v1.PodFailed, describe(failed)
	})
	if msg := failed.Status.Message; !strings.Contains(msg, file) || !strings.Contains(msg, "quarantined as "+file+".corrupt-") {
		t.Errorf("the report does not say which file and where it went: %q", msg)
	}
	quarantined, _ := filepath.Glob(file + ".corrupt-*")
	if len(quarantined) != 1 {
		t.Errorf("quarantined files %v", quarantined)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the corrupt file is still in place: %v", err)
	}
	n.waitRuntimeGone(string(victim.UID))
	out, err := n.berth("pods", "--server", n.url(""))
	if err != nil || !strings.Contains(out, "victim") {
		t.Errorf("berth pods does not show the corrupt pod: %q, %v", out, err)
	}

	// Deleting the name forgets the report.
	if out, err := n.berth("delete", "pod", "victim", "--root-dir", n.root); err != nil {
		t.Errorf("deleting the corrupt pod = %q, %v", out, err)
	}
	waitFor(t, 30*time.Second, "the report gone", func() (bool, string) {
		p := n.apiPod("victim")
		return p == nil, describe(p)
	})
	if p := n.apiPod("good"); p == nil || p.UID != good.UID || p.Status.Phase != v1.PodRunning {
		t.Errorf("the intact pod was disturbed: %s", describe(p))
	}
}
