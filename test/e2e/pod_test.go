package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A pod with an init container and two app containers on the CNI bridge:
// the init container runs first, env (values and the downward API) and
// volumes (emptyDir on disk and in memory, hostPath) are visible inside,
// the security context applies, and the pod serves HTTP on its pod IP.
func TestInitContainerAndTwoApps(t *testing.T) {
	n := startNode(t)
	hostDir := filepath.Join(n.root, "host-data")
	n.writeManifest("app.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata:
  name: app
  labels: {tier: web}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: setup
    image: %[1]s
    command: ["sh", "-c", "echo initialised > /work/ready && echo from-init > /host/init.txt"]
    volumeMounts:
    - {name: work, mountPath: /work}
    - {name: host, mountPath: /host}
  containers:
  - name: web
    image: %[1]s
    command: ["httpd", "-f", "-p", "8000", "-h", "/work"]
    ports: [{containerPort: 8000}]
    env:
    - {name: GREETING, value: "hello $(POD_NAME)"}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NS
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    - name: POD_UID
      valueFrom: {fieldRef: {fieldPath: metadata.uid}}
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: TIER
      valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}
    - name: MEM_LIMIT_MI
      valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}
    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 200m, memory: 64Mi}
    volumeMounts:
    - {name: work, mountPath: /work}
    - {name: scratch, mountPath: /scratch}
  - name: sidecar
    image: %[1]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    securityContext:
      runAsUser: 1000
      runAsGroup: 3000
      readOnlyRootFilesystem: true
    volumeMounts:
    - {name: work, mountPath: /work, readOnly: true}
    - {name: host, mountPath: /host}
  volumes:
  - name: work
    emptyDir: {}
  - name: scratch
    emptyDir: {medium: Memory, sizeLimit: 8Mi}
  - name: host
    hostPath: {path: %[2]s, type: DirectoryOrCreate}
`, busybox, hostDir))

	pod := n.waitRunning("app", 60*time.Second)

	// The init container ran to completion before the apps started.
	if len(pod.Status.InitContainerStatuses) != 1 {
		t.Fatalf("want one init container status: %s", describe(pod))
	}
	initSt := pod.Status.InitContainerStatuses[0]
	if initSt.State.Terminated == nil || initSt.State.Terminated.ExitCode != 0 || initSt.State.Terminated.Reason != "Completed" {
		t.Fatalf("init container did not complete: %+v", initSt.State)
	}
	web := findStatus(pod, "web")
	if web.State.Running == nil || web.State.Running.StartedAt.Before(&initSt.State.Terminated.FinishedAt) {
		t.Fatalf("web must start after the init container finished: init %+v, web %+v", initSt.State, web.State)
	}

	// Env: plain values with $(VAR) expansion and the downward API.
	env := parseEnv(n.exec(pod, "web", "env"))
	want := map[string]string{
		"GREETING":     "hello $(POD_NAME)", // POD_NAME is declared after GREETING: not expanded
		"POD_NAME":     "app-" + nodeName,
		"POD_NS":       "default",
		"POD_UID":      string(pod.UID),
		"POD_IP":       pod.Status.PodIP,
		"NODE":         nodeName,
		"TIER":         "web",
		"MEM_LIMIT_MI": "64",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}

	// Volumes: the init container's file in the shared emptyDir, the tmpfs
	// emptyDir, and the hostPath created on the host.
	if got := n.exec(pod, "sidecar", "cat", "/work/ready"); got != "initialised\n" {
		t.Errorf("emptyDir content = %q", got)
	}
	if mounts := n.exec(pod, "web", "cat", "/proc/mounts"); !strings.Contains(mounts, "tmpfs /scratch tmpfs") {
		t.Errorf("the Memory emptyDir is not a tmpfs:\n%s", mounts)
	}
	if data, err := os.ReadFile(filepath.Join(hostDir, "init.txt")); err != nil || string(data) != "from-init\n" {
		t.Errorf("hostPath: %q, %v", data, err)
	}

	// Security context: user and group, read-only root, read-only mount.
	if got := strings.TrimSpace(n.exec(pod, "sidecar", "id", "-u")); got != "1000" {
		t.Errorf("runAsUser: id -u = %s", got)
	}
	if got := strings.TrimSpace(n.exec(pod, "sidecar", "id", "-g")); got != "3000" {
		t.Errorf("runAsGroup: id -g = %s", got)
	}
	if out := n.exec(pod, "sidecar", "sh", "-c", "touch /x 2>&1; echo rc=$?"); !strings.Contains(out, "rc=1") {
		t.Errorf("readOnlyRootFilesystem: writing / succeeded: %s", out)
	}
	if out := n.exec(pod, "sidecar", "sh", "-c", "touch /work/x 2>&1; echo rc=$?"); !strings.Contains(out, "rc=1") {
		t.Errorf("readOnly mount: writing /work succeeded: %s", out)
	}

	// The pod has an IP from the pod CIDR and serves HTTP on it.
	_, cidr, _ := net.ParseCIDR(n.cidr)
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !cidr.Contains(ip) {
		t.Fatalf("pod IP %q is not in %s", pod.Status.PodIP, n.cidr)
	}
	if body := httpGet(t, "http://"+net.JoinHostPort(pod.Status.PodIP, "8000")+"/ready"); body != "initialised\n" {
		t.Errorf("HTTP on the pod IP: %q", body)
	}
	if pod.Status.QOSClass != v1.PodQOSBurstable {
		t.Errorf("qosClass = %s, want Burstable", pod.Status.QOSClass)
	}
}

// A host-network pod shares the node's network: it serves on 127.0.0.1 and
// its pod IP is the node's.
func TestHostNetworkPodServesHTTP(t *testing.T) {
	n := startNode(t)
	port := freePort(t)
	n.writeManifest("hostnet.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p %d -h /tmp/www"]
`, busybox, port))
	pod := n.waitRunning("hostnet", 60*time.Second)
	body := httpGet(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	host, _ := os.Hostname()
	if strings.TrimSpace(body) != host {
		t.Errorf("a host-network pod has the node's hostname: got %q, want %q", body, host)
	}
	if pod.Status.PodIP == "" || pod.Status.PodIP != pod.Status.HostIP {
		t.Errorf("host-network pod IP %q must be the host IP %q", pod.Status.PodIP, pod.Status.HostIP)
	}
}

// hostPort publishes a bridge pod's port on the node.
func TestHostPort(t *testing.T) {
	n := startNode(t)
	port := freePort(t)
	n.writeManifest("hostport.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: hostport}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /tmp/www && echo via-hostport > /tmp/www/index.html && exec httpd -f -p 80 -h /tmp/www"]
    ports: [{containerPort: 80, hostPort: %d}]
`, busybox, port))
	pod := n.waitRunning("hostport", 60*time.Second)
	if body := httpGet(t, "http://"+net.JoinHostPort(pod.Status.HostIP, strconv.Itoa(port))+"/"); body != "via-hostport\n" {
		t.Errorf("GET via hostPort: %q", body)
	}
}

func findStatus(pod *v1.Pod, name string) v1.ContainerStatus {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return v1.ContainerStatus{}
}

func parseEnv(out string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// httpGet fetches url, retrying briefly: a server in a just-started
// container may not listen yet.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := http.Client{Timeout: 3 * time.Second}
	var lastErr error
	for i := 0; i < 50; i++ {
		resp, err := client.Get(url)
		if err == nil {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				return string(body)
			}
			lastErr = fmt.Errorf("status %s, body %q, err %v", resp.Status, body, err)
		} else {
			lastErr = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", url, lastErr)
	return ""
}
