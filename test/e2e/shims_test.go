package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/berth-dev/berth/internal/cnigc"
)

// containerd 1.6 forgets a shim whose container is gone from its metadata
// when it restarts (killed amid a container's creation or removal): it
// deletes the task's directory and leaves the shim running for ever. berth
// kills such shims when it starts or restarts its containerd. Here the
// pod's sandbox record is deleted under its running shim while berth is
// down (as a containerd killed mid-removal leaves it), containerd is
// stopped, and berth is started: the shim must go. berth before this fix
// left it (make chaos, seed 20261127: a shim left after every pod was
// deleted). The fault is containerd 1.x's, whose sandbox is a container
// record: containerd 2 keeps sandboxes in a store of their own, and with
// only the pause container's record deleted it still lists the sandbox,
// whose app container it then reports running for ever once the shim is
// gone. So this runs on the host's containerd 1.6, whatever runtime the
// run's other nodes manage.
func TestForgottenShimIsReaped(t *testing.T) {
	n := startNodeWithRuntime(t, "", "")
	sandbox, shim := forgottenShimPod(t, n)
	if cached := cachedCNIResults(sandbox); len(cached) != 2 {
		t.Fatalf("cached CNI results of the sandbox: %v, want its network's and its loopback's", cached)
	}
	netns := n.sandboxNetns(sandbox)
	if _, err := os.Stat(netns); err != nil {
		t.Fatalf("the sandbox's netns: %v", err)
	}

	n.kill9()
	n.removeManifest("web.yaml")
	forgetContainer(t, n, sandbox)
	n.stopContainerd()
	if !alive(shim) {
		t.Fatalf("the shim (pid %d) died with containerd: nothing to test", shim)
	}

	n.start()
	waitFor(t, 30*time.Second, "the forgotten shim killed", func() (bool, string) {
		return !alive(shim), fmt.Sprintf("pid %d alive", shim)
	})
	if log, _ := os.ReadFile(filepath.Join(n.root, "berth.log")); !strings.Contains(string(log), "killed a shim containerd no longer knows") {
		t.Errorf("berth's log does not say it killed the shim")
	}
	// No CNI DEL ever came for the forgotten sandbox: berth's network GC
	// removes its rules, its lease, its network namespace (and the veth in
	// it) and libcni's cached results, which lie outside the root dir
	// (/var/lib/cni/results).
	waitFor(t, 30*time.Second, "the forgotten sandbox's network state collected", func() (bool, string) {
		left := cachedCNIResults(sandbox)
		if natHolds(t, sandbox) {
			left = append(left, "nat rules")
		}
		if _, err := os.Stat(netns); err == nil {
			left = append(left, "netns "+netns)
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
}

// cachedCNIResults are the files libcni cached for sandbox id.
func cachedCNIResults(id string) []string {
	found, _ := filepath.Glob(filepath.Join(cnigc.DefaultResultsDir, "*-"+id+"-*"))
	return found
}

// A shim containerd forgets while berth runs (its sandbox removed through
// the CRI before its task was recorded: containerd killed amid the
// sandbox's creation, then restarted) is killed when berth stops, at the
// latest. berth before this fix left it (make chaos, seed
// 1795783084975723460).
func TestShimForgottenWhileRunningIsReapedAtStop(t *testing.T) {
	n := startNode(t)
	sandbox, shim := forgottenShimPod(t, n)
	n.removeManifest("web.yaml")
	// Forgotten before berth stops the pod: berth's removal then finds no
	// sandbox, as the CRI reports after such a restart.
	forgetContainer(t, n, sandbox)
	waitFor(t, 60*time.Second, "web gone", func() (bool, string) {
		return n.pod("web") == nil, "still listed"
	})
	if !alive(shim) {
		t.Fatalf("the shim (pid %d) is gone already: nothing to test", shim)
	}
	n.stop()
	if alive(shim) {
		t.Errorf("the forgotten shim (pid %d) outlived berth's clean stop", shim)
	}
	n.start() // the cleanup goes through the containerd of a running berth
}

// forgottenShimPod runs a pod and returns its sandbox's ID and shim.
func forgottenShimPod(t *testing.T, n *node) (sandbox string, shim int) {
	t.Helper()
	n.writeManifest("web.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
`, busybox))
	pod := n.waitRunning("web", 60*time.Second)
	sbs := n.sandboxes(string(pod.UID))
	if len(sbs) != 1 {
		t.Fatalf("sandboxes of web: %d", len(sbs))
	}
	shim = shimOf(t, sbs[0].Id)
	if shim == 0 {
		t.Fatalf("no shim runs for sandbox %s", sbs[0].Id)
	}
	return sbs[0].Id, shim
}

// forgetContainer deletes containerd's record of a container under its
// running task, as a containerd killed amid its creation or removal leaves
// it.
func forgetContainer(t *testing.T, n *node, id string) {
	t.Helper()
	socket := filepath.Join(n.root, "containerd", "containerd.sock")
	c, err := client.New(socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(t.Context(), "k8s.io"), 30*time.Second)
	defer cancel()
	// The metadata service, not Container.Delete, which refuses a container
	// whose task runs.
	if err := c.ContainerService().Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// shimOf returns the pid of the shim started for id, or 0.
func shimOf(t *testing.T, id string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(filepath.Base(strings.SplitN(string(data), "\x00", 2)[0]), "containerd-shim") {
			continue
		}
		if strings.Contains(string(data), "\x00-id\x00"+id+"\x00") {
			var pid int
			fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid)
			return pid
		}
	}
	return 0
}
