package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func writeConfig(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A KubeletConfiguration file is honoured (here maxPods: the second pod
// does not fit, and as both are static, hence critical, it cannot preempt
// the first either), and a field berth does not implement is named in a
// warning at start-up.
func TestConfigFile(t *testing.T) {
	cfg := writeConfig(t, `
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 1
registryPullQPS: 3
`)
	n := startNode(t, "--config", cfg)
	if log := n.logTail(); !strings.Contains(log, "registryPullQPS") {
		t.Errorf("the unimplemented field is not named at start-up:\n%s", log)
	}
	n.writeManifest("a.yaml", sleeper("a", "x"))
	n.waitRunning("a", time.Minute)
	n.writeManifest("b.yaml", sleeper("b", "x"))
	waitFor(t, 30*time.Second, "the second pod to be rejected", func() (bool, string) {
		p := n.pod("b")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "UnexpectedAdmissionError" &&
			strings.Contains(p.Status.Message, "no set of running pods found to reclaim resources: [(res: pods, q: 1), ]"), describe(p)
	})
	if p := n.pod("b"); len(n.sandboxes(string(p.UID))) != 0 {
		t.Error("a rejected pod must not run")
	}
}

// Reservations larger than the node stop start-up, naming the fields.
func TestReservationsLargerThanTheNode(t *testing.T) {
	cfg := writeConfig(t, `
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
kubeReserved: {memory: 100Ti}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cgroupRoot := fmt.Sprintf("/berth-e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeCgroups(t, cgroupRoot) })
	out, err := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "run", "--config", cfg,
		"--root-dir", t.TempDir(), "--read-only-port", "0", "--cgroup-root", cgroupRoot,
		"--pause-binary", filepath.Join(bins, "berth-pause")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "kubeReserved.memory") {
		t.Fatalf("berth must refuse to start, naming kubeReserved.memory: %v\n%s", err, out)
	}
}

// Invalid configuration stops start-up with every bad field named.
func TestConfigFileErrors(t *testing.T) {
	cfg := writeConfig(t, `
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: -1
cgroupDriver: systemd
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := t.TempDir()
	out, err := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "run", "--config", cfg,
		"--root-dir", root, "--pause-binary", filepath.Join(bins, "berth-pause")).CombinedOutput()
	if err == nil {
		t.Fatalf("berth started with an invalid configuration:\n%s", out)
	}
	for _, want := range []string{"maxPods", "cgroupDriver", "systemd"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error does not mention %s:\n%s", want, out)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("a refused start-up must not touch the root dir, found %v", fmt.Sprint(entries))
	}
}
