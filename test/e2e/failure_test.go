package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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

// With the relist effectively off, container exits still reach berth at
// once through containerd's event stream: a pod whose container exits
// becomes Succeeded long before any periodic sync could notice.
func TestExitsArriveByEvent(t *testing.T) {
	n := startNode(t, "--relist-period", "1h")
	n.writeManifest("once.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "sleep 1"]
`, busybox))
	// The worker's own resync is a minute; 30 s is far inside it.
	waitFor(t, 30*time.Second, "the pod to succeed", func() (bool, string) {
		p := n.pod("once")
		return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
	})
}

// postStart and preStop hooks run: postStart before the container counts as
// started, preStop before the container is stopped when its pod is deleted.
func TestLifecycleHooks(t *testing.T) {
	n := startNode(t)
	hostDir := filepath.Join(n.root, "hooks")
	// An httpGet hook is sent by berth itself; this server on the node
	// records it.
	hooked := make(chan *http.Request, 1)
	hookServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hooked <- r:
		default:
		}
	}))
	defer hookServer.Close()
	hookPort := hookServer.Listener.Addr().(*net.TCPAddr).Port
	n.writeManifest("hooks.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: hooks}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: main
    image: %[1]s
    command: ["sh", "-c", "trap 'echo stopped >> /out/events; exit 0' TERM; while sleep 1; do :; done"]
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "echo post-start >> /out/events"]}
      preStop:
        exec: {command: ["sh", "-c", "echo pre-stop >> /out/events"]}
    volumeMounts: [{name: out, mountPath: /out}]
  - name: web
    image: %[1]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    lifecycle:
      postStart:
        httpGet: {host: 127.0.0.1, port: %[3]d, path: /started, httpHeaders: [{name: X-Pod, value: hooks}]}
  volumes:
  - name: out
    hostPath: {path: %[2]s, type: DirectoryOrCreate}
`, busybox, hostDir, hookPort))
	pod := n.waitRunning("hooks", time.Minute)
	select {
	case r := <-hooked:
		if r.URL.Path != "/started" || r.Header.Get("X-Pod") != "hooks" || !strings.HasPrefix(r.UserAgent(), "kube-lifecycle/") {
			t.Errorf("httpGet postStart hook: path %s, X-Pod %q, User-Agent %q", r.URL.Path, r.Header.Get("X-Pod"), r.UserAgent())
		}
	case <-time.After(30 * time.Second):
		t.Error("the httpGet postStart hook never arrived")
	}
	if got := n.exec(pod, "main", "cat", "/out/events"); got != "post-start\n" {
		t.Fatalf("after start, events = %q", got)
	}
	n.removeManifest("hooks.yaml")
	waitFor(t, time.Minute, "the pod to be removed", func() (bool, string) {
		return len(n.sandboxes(string(pod.UID))) == 0, "sandbox still there"
	})
	data, err := os.ReadFile(filepath.Join(hostDir, "events"))
	if err != nil || string(data) != "post-start\npre-stop\nstopped\n" {
		t.Fatalf("events = %q, %v; want postStart, then preStop, then SIGTERM", data, err)
	}
}

// When the managed containerd dies, berth restarts it: the running pod is
// untouched (same container, no restart), berth stays healthy, and new pods
// start.
func TestManagedContainerdRestarts(t *testing.T) {
	n := startNode(t)
	n.writeManifest("steady.yaml", sleeper("steady", "x"))
	before := n.waitRunning("steady", time.Minute)
	id := containerID(t, before, "main")

	pidFile := filepath.Join(n.root, "containerd", "containerd.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	oldPid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || oldPid <= 1 {
		t.Fatalf("containerd pid file: %q", data)
	}
	if err := syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "a new containerd", func() (bool, string) {
		data, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return pid > 1 && pid != oldPid && alive(pid), "pid " + string(data)
	})
	n.writeManifest("fresh.yaml", sleeper("fresh", "x"))
	n.waitRunning("fresh", time.Minute)
	after := n.waitRunning("steady", time.Minute)
	if got := containerID(t, after, "main"); got != id || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the running pod was disturbed: container %s -> %s, restarts %d", id, got, after.Status.ContainerStatuses[0].RestartCount)
	}
	if _, err := n.get("/healthz"); err != nil {
		t.Errorf("berth is unhealthy after containerd came back: %v", err)
	}
}

// A CNI failure (here: the pod CIDR has room for one pod) shows on the pod
// that hit it, with the CNI's reason, and harms neither the other pod nor
// berth.
func TestCNIFailureIsReportedOnThePod(t *testing.T) {
	n := startNode(t, "--pod-cidr", fmt.Sprintf("10.213.%d.0/30", 250+time.Now().Nanosecond()%5))
	n.writeManifest("first.yaml", sleeper("first", "x"))
	n.waitRunning("first", time.Minute)
	n.writeManifest("second.yaml", sleeper("second", "x"))
	waitFor(t, time.Minute, "the CNI error on the second pod", func() (bool, string) {
		p := n.pod("second")
		if p == nil {
			return false, "no pod"
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReadyToStartContainers && c.Status == v1.ConditionFalse &&
				strings.Contains(c.Message, "no IP addresses available") {
				return true, ""
			}
		}
		return false, describe(p)
	})
	n.waitRunning("first", time.Minute)
	if _, err := n.get("/healthz"); err != nil {
		t.Errorf("berth unhealthy: %v", err)
	}
}

// A runtime endpoint with nothing behind it stops start-up with a message
// naming it, instead of running half-alive.
func TestMissingRuntimeEndpoint(t *testing.T) {
	root := t.TempDir()
	sock := filepath.Join(root, "nothing.sock")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cgroupRoot := fmt.Sprintf("/berth-e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeCgroups(t, cgroupRoot) })
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "run",
		"--root-dir", root, "--container-runtime-endpoint", "unix://"+sock,
		"--read-only-port", strconv.Itoa(freePort(t)), "--cgroup-root", cgroupRoot,
		"--pause-binary", filepath.Join(bins, "berth-pause"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("berth started without a runtime:\n%s", out)
	}
	if !strings.Contains(string(out), sock) {
		t.Errorf("the error does not name the endpoint %s:\n%s", sock, out)
	}
}

// A local API port that is taken stops start-up before berth starts a
// runtime or touches its root dir.
func TestAPIPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "run",
		"--root-dir", root, "--read-only-port", strconv.Itoa(port),
		"--pause-binary", filepath.Join(bins, "berth-pause")).CombinedOutput()
	if err == nil {
		t.Fatalf("berth started on a port in use:\n%s", out)
	}
	if !strings.Contains(string(out), strconv.Itoa(port)) {
		t.Errorf("the error does not name the port:\n%s", out)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("berth touched its root dir before failing: %v", entries)
	}
}
