package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/imagebuild"
)

// events returns the pod's events from berth's API.
func (n *node) events(name string) []v1.Event {
	n.t.Helper()
	body, err := n.get("/pods/default/" + name + "-" + nodeName + "/events")
	if err != nil {
		n.t.Fatalf("events: %v", err)
	}
	var list v1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		n.t.Fatalf("decode events: %v", err)
	}
	return list.Items
}

func (n *node) waitEvent(name, reason, contains string) {
	n.t.Helper()
	waitFor(n.t, time.Minute, fmt.Sprintf("a %s event containing %q", reason, contains), func() (bool, string) {
		var seen []string
		for _, e := range n.events(name) {
			if e.Reason == reason && strings.Contains(e.Message, contains) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "; ")
	})
}

// An httpGet readiness probe makes a busybox httpd pod Ready only once the
// page it checks exists; until then the container runs but is not ready.
func TestReadinessProbeHTTP(t *testing.T) {
	n := startNode(t)
	n.writeManifest("ready.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: ready}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %s
    command: ["sh", "-c", "mkdir -p /www; (sleep 3; echo ok > /www/healthz) & exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 1
`, busybox))
	waitFor(t, time.Minute, "the container to run but not be ready", func() (bool, string) {
		p := n.pod("ready")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, describe(p)
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Running != nil && !cs.Ready && !podReady(p), describe(p)
	})
	n.waitRunning("ready", time.Minute)
	n.waitEvent("ready", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404")
	metrics, err := n.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prober_probe_total{", `probe_type="Readiness"`, `pod="ready-` + nodeName + `"`, `result="successful"`, "prober_probe_duration_seconds"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A restart of berth (even kill -9) keeps the ready pod ready: the
	// first status the new berth shows already says so.
	n.kill9()
	n.start()
	waitFor(t, time.Minute, "the pod back in /pods", func() (bool, string) {
		p := n.pod("ready")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, describe(p)
		}
		if !p.Status.ContainerStatuses[0].Ready || !podReady(p) {
			t.Fatalf("after a restart the ready pod is shown unready: %s", describe(p))
		}
		return true, ""
	})
}

// An exec liveness probe that starts failing gets the container killed and
// restarted, with the kubelet's events.
func TestLivenessProbeRestarts(t *testing.T) {
	n := startNode(t)
	n.writeManifest("live.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: live}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; touch /tmp/healthy; sleep 3; rm /tmp/healthy; while sleep 1; do :; done"]
    livenessProbe:
      exec: {command: [cat, /tmp/healthy]}
      periodSeconds: 1
      failureThreshold: 2
`, busybox))
	first := n.waitRunning("live", time.Minute)
	waitFor(t, time.Minute, "a restart", func() (bool, string) {
		p := n.pod("live")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1, describe(p)
	})
	if p := n.pod("live"); p.UID != first.UID {
		t.Fatalf("the pod was replaced instead of its container restarted")
	}
	n.waitEvent("live", "Unhealthy", "Liveness probe failed:")
	n.waitEvent("live", "Killing", "Container app failed liveness probe, will be restarted")
	out, err := n.berth("describe", "pod", "live-"+nodeName)
	if err != nil || !strings.Contains(out, "Liveness probe failed") || !strings.Contains(out, "liveness") {
		t.Errorf("berth describe pod does not show the probe and its events: %v\n%s", err, out)
	}
}

// A startup probe that never succeeds kills the container after
// failureThreshold x period; until then the container is not started.
func TestStartupProbeFails(t *testing.T) {
	n := startNode(t)
	n.writeManifest("slow.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "trap 'exit 0' TERM; while sleep 1; do :; done"]
    startupProbe:
      exec: {command: [cat, /tmp/never]}
      periodSeconds: 1
      failureThreshold: 3
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`, busybox))
	waitFor(t, time.Minute, "the container running but not started", func() (bool, string) {
		p := n.pod("slow")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, describe(p)
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Running != nil && cs.Started != nil && !*cs.Started && !cs.Ready, describe(p)
	})
	waitFor(t, time.Minute, "a restart after the startup probe failed", func() (bool, string) {
		p := n.pod("slow")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1, describe(p)
	})
	n.waitEvent("slow", "Unhealthy", "Startup probe failed:")
	n.waitEvent("slow", "Killing", "Container app failed startup probe, will be restarted")
}

// A tcpSocket readiness probe, and a grpc one against a small static Go
// health server packaged as an image.
func TestTCPAndGRPCProbes(t *testing.T) {
	n := startNode(t)
	bin := filepath.Join(t.TempDir(), "grpchealth")
	build := exec.Command("go", "build", "-o", bin, "../images/grpchealth")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the grpc health server: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := imagebuild.Build([]imagebuild.File{{Path: "/grpchealth", Mode: 0o755, Data: data}},
		ggcrv1.Config{Entrypoint: []string{"/grpchealth"}})
	if err != nil {
		t.Fatal(err)
	}
	const ref = "berth.local/grpchealth:e2e"
	tarball := filepath.Join(n.root, "grpchealth.tar")
	if err := imagebuild.WriteTarball(tarball, ref, img); err != nil {
		t.Fatal(err)
	}
	if out, err := n.berth("images", "import", "--root-dir", n.root, tarball); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	n.writeManifest("probes.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: probes}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: tcp
    image: %s
    command: ["httpd", "-f", "-p", "7070"]
    readinessProbe:
      tcpSocket: {port: 7070}
      periodSeconds: 1
  - name: grpc
    image: %s
    imagePullPolicy: Never
    args: ["-port", "50051", "-not-serving", "sick"]
    readinessProbe:
      grpc: {port: 50051}
      periodSeconds: 1
  - name: grpc-sick
    image: %s
    imagePullPolicy: Never
    args: ["-port", "50052", "-not-serving", "sick"]
    readinessProbe:
      grpc: {port: 50052, service: sick}
      periodSeconds: 1
`, busybox, ref, ref))
	waitFor(t, time.Minute, "tcp and grpc ready, the sick service not", func() (bool, string) {
		p := n.pod("probes")
		if p == nil {
			return false, "no pod"
		}
		ready := map[string]bool{}
		running := 0
		for _, cs := range p.Status.ContainerStatuses {
			ready[cs.Name] = cs.Ready
			if cs.State.Running != nil {
				running++
			}
		}
		return running == 3 && ready["tcp"] && ready["grpc"] && !ready["grpc-sick"], describe(p)
	})
	n.waitEvent("probes", "Unhealthy", "Readiness probe failed:")
}
