package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/pki"
)

// podCgroupDirs returns the directories of the pod's cgroup in every
// hierarchy berth manages: the unified tree on a cgroup2 host, each v1
// hierarchy (not a hybrid host's cgroup2 mount) otherwise.
func (n *node) podCgroupDirs(uid string) []string {
	n.t.Helper()
	const mount = "/sys/fs/cgroup"
	roots := []string{mount}
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		n.t.Fatal(err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		entries, err := os.ReadDir(mount)
		if err != nil {
			n.t.Fatal(err)
		}
		roots = nil
		for _, e := range entries {
			dir := filepath.Join(mount, e.Name())
			if e.IsDir() && unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP_SUPER_MAGIC {
				roots = append(roots, dir)
			}
		}
	}
	var dirs []string
	for _, r := range roots {
		for _, pattern := range []string{"kubepods/pod" + uid, "kubepods/*/pod" + uid} {
			found, _ := filepath.Glob(filepath.Join(r, n.cgroupRoot, pattern))
			dirs = append(dirs, found...)
		}
	}
	return dirs
}

// A process left in a pod's cgroup (here one moved in from outside, as a
// process a container forked off and its runtime lost would be) no longer
// keeps the pod from going: when the pod is deleted, berth kills it, as the
// kubelet's pod cgroup manager does, removes the cgroup, and says so in an
// event on the pod.
func TestPodCgroupStragglerIsKilled(t *testing.T) {
	n := startNode(t)
	n.writeManifest("straggle.yaml", sleeper("straggle", "x"))
	pod := n.waitRunning("straggle", 60*time.Second)
	uid := string(pod.UID)

	straggler := exec.Command("sleep", "1000")
	if err := straggler.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _ = straggler.Wait(); close(ended) }()
	t.Cleanup(func() {
		_ = straggler.Process.Kill()
		<-ended
	})
	dirs := n.podCgroupDirs(uid)
	if len(dirs) == 0 {
		t.Fatalf("no cgroup of pod %s under %s", uid, n.cgroupRoot)
	}
	pid := straggler.Process.Pid
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatalf("move the straggler into %s: %v", d, err)
		}
	}

	n.removeManifest("straggle.yaml")
	deleted := time.Now()
	waitFor(t, 60*time.Second, "the pod and its cgroup to be removed", func() (bool, string) {
		for _, p := range n.pods() {
			if string(p.UID) == uid {
				return false, "still in /pods: " + describe(&p)
			}
		}
		if left := n.podCgroupDirs(uid); len(left) > 0 {
			return false, "cgroup left: " + strings.Join(left, " ")
		}
		return true, ""
	})
	t.Logf("pod and cgroup removed %s after the manifest went", time.Since(deleted).Round(10*time.Millisecond))
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatalf("the straggler %d still runs after its pod was removed", pid)
	}
	if ws, ok := straggler.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the straggler ended by %v, want SIGKILL", straggler.ProcessState)
	}
	var ev *v1.Event
	for _, e := range n.apiPodEvents(pod.Name) {
		if e.Reason == "KilledStragglers" {
			ev = &e
		}
	}
	if ev == nil {
		t.Fatalf("no KilledStragglers event on %s", pod.Name)
	}
	if ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, strconv.Itoa(pid)) {
		t.Errorf("event %s %q: want a Warning naming pid %d", ev.Type, ev.Message, pid)
	}
	if log := n.berthLog(); !strings.Contains(log, fmt.Sprint(pid)) {
		t.Errorf("berth's log does not name the killed pid %d", pid)
	}
}

// getAs fetches url as the given uid (and gid), with curl, and returns
// the HTTP status and body.
func getAs(t *testing.T, uid uint32, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", "-s", "-o", "-", "-w", "\n%{http_code}", url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %s as uid %d: %v", url, uid, err)
	}
	i := strings.LastIndex(string(out), "\n")
	if i < 0 {
		t.Fatalf("curl %s: no status in %q", url, out)
	}
	body, code := string(out[:i]), string(out[i+1:])
	status, err := strconv.Atoi(strings.TrimSpace(code))
	if err != nil {
		t.Fatalf("curl %s: no status in %q", url, out)
	}
	return status, body
}

// A local user who is not root cannot read a container's log through the
// read-only port, as with the kubelet's, whose read-only port serves no
// logs: the log files are root's. Root still reads it with berth logs,
// through the admin socket.
func TestReadOnlyPortServesNoLogs(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("log-token,operator,1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	n := startNode(t, "--port", strconv.Itoa(port), "--token-auth-file", tokenFile)
	const secret = "the-secret-line-4711"
	n.writeManifest("talker.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "echo %s; exec sleep 3600"]
`, busybox, secret))
	n.waitRunning("talker", 60*time.Second)
	waitFor(t, 30*time.Second, "berth logs to show the line", func() (bool, string) {
		out, err := n.berth("logs", "talker-"+nodeName)
		return err == nil && strings.Contains(out, secret), fmt.Sprintf("%q, %v", out, err)
	})

	const nobody = 65534
	for _, path := range []string{
		"/containerLogs/default/talker-" + nodeName + "/main",
		"/containerLogs/default/talker-" + nodeName + "/main?follow=false&tailLines=5",
	} {
		code, body := getAs(t, nobody, n.url(path))
		if code != http.StatusMethodNotAllowed || strings.Contains(body, secret) {
			t.Errorf("GET %s as uid %d: %d %q; want 405 and no log", path, nobody, code, body)
		}
	}
	// berth logs, run by that user, cannot reach the admin socket, and
	// says so.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := n.berthCmd(ctx, "logs", "talker-"+nodeName)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 4 || strings.Contains(stdout.String(), secret) ||
		!strings.Contains(stderr.String(), "admin socket") {
		t.Errorf("berth logs as uid %d: exit %d, stdout %q, stderr %q; want exit 4 (not reachable) naming the admin socket",
			nobody, code, stdout.String(), stderr.String())
	}

	// The secure port serves the log, to an authenticated caller only.
	logsPath := "/containerLogs/default/talker-" + nodeName + "/main"
	if code, _ := n.secureGet(t, port, logsPath, ""); code != http.StatusUnauthorized {
		t.Errorf("GET %s on the secure port without a token: %d, want 401", logsPath, code)
	}
	if code, body := n.secureGet(t, port, logsPath, "log-token"); code != http.StatusOK || !strings.Contains(body, secret) {
		t.Errorf("GET %s on the secure port with the token: %d %q", logsPath, code, body)
	}
	// What the kubelet's read-only port serves is still served to anyone.
	if code, body := getAs(t, nobody, n.url("/pods")); code != http.StatusOK || !strings.Contains(body, "talker-"+nodeName) {
		t.Errorf("GET /pods as uid %d: %d", nobody, code)
	}
}

// readyCondition returns /node's Ready condition, nil when there is none.
// The client waits longer than berth's own bound on the runtime's Status.
func (n *node) readyCondition() (*v1.NodeCondition, error) {
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(n.url("/node"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var node v1.Node
	if err := json.NewDecoder(resp.Body).Decode(&node); err != nil {
		return nil, fmt.Errorf("decode /node: %w", err)
	}
	for i, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return &node.Status.Conditions[i], nil
		}
	}
	return nil, nil
}

func showCondition(c *v1.NodeCondition, err error) string {
	if err != nil {
		return err.Error()
	}
	if c == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
}

// Standalone /node carries the Ready condition, computed as in cluster
// mode and as the kubelet's: True while the runtime answers, False with the
// reason when it stops answering (frozen with SIGSTOP here, so that nothing
// restarts it meanwhile: to the CRI it is as dead as a killed one), and
// True again when it is back.
func TestStandaloneNodeReadyCondition(t *testing.T) {
	n := startNode(t)
	waitFor(t, 60*time.Second, "/node Ready=True", func() (bool, string) {
		c, err := n.readyCondition()
		return err == nil && c != nil && c.Status == v1.ConditionTrue && c.Reason == "KubeletReady", showCondition(c, err)
	})

	data, err := os.ReadFile(filepath.Join(n.root, "containerd", "containerd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		t.Fatalf("containerd pid %q: %v", data, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	cont := func() {
		if !continued {
			continued = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(cont)

	var down *v1.NodeCondition
	waitFor(t, 60*time.Second, "/node Ready=False with the runtime down", func() (bool, string) {
		c, err := n.readyCondition()
		down = c
		return err == nil && c != nil && c.Status == v1.ConditionFalse, showCondition(c, err)
	})
	if down.Reason != "KubeletNotReady" || !strings.Contains(down.Message, "container runtime is down") {
		t.Errorf("Ready while the runtime is frozen: %s; want KubeletNotReady naming the runtime", showCondition(down, nil))
	}

	cont()
	waitFor(t, 60*time.Second, "/node Ready=True once the runtime is back", func() (bool, string) {
		c, err := n.readyCondition()
		return err == nil && c != nil && c.Status == v1.ConditionTrue, showCondition(c, err)
	})
}

// secureGet fetches path from the node's secure port, trusting the
// certificate berth made, with token as bearer ("" for none).
func (n *node) secureGet(t *testing.T, port int, path, token string) (int, string) {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(n.root, "pki", pki.CertFileName))
	if err != nil {
		t.Fatalf("the secure port's certificate: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(port)+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s on the secure port: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
