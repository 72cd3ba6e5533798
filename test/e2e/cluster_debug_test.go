package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl debug -i against a berth node joined to the real control plane:
// the ephemeral busybox starts in the target container's process
// namespace, kubectl attaches to it (what is typed reaches its shell and
// its output comes back), its exit is reported in the pod's
// ephemeralContainerStatuses, and it is never restarted.
func TestClusterDebugAttach(t *testing.T) {
	cp, client, bins := startControlPlane(t)
	n := startClusterNode(t, cp, "berth-debug", "--config", keepImagesConfig(t))
	waitNodeReady(t, client, n.name, true, 2*time.Minute)
	applyYAML(t, cp, `apiVersion: v1
kind: Pod
metadata: {name: target, namespace: default}
spec:
  nodeName: berth-debug
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: `+busybox+`
    imagePullPolicy: Never
    command: ["sh", "-c", "echo hello-from-target; exec sleep 3600"]
`)
	waitFor(t, 2*time.Minute, "target running", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "target", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, describe(p)
	})

	admin, err := cp.ClientKubeconfig("debug-admin", "debug-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Kubectl, "--kubeconfig="+admin, "debug", "-i", "target",
		"--image="+busybox, "--image-pull-policy=Never", "--container=dbg", "--target=app", "--", "sh")
	cmd.Env = append(os.Environ(), "KUBERC=off")
	// The shell reads its commands from the attached stdin; the target's
	// sleep seen in /proc shows the shared process namespace. Stdin stays
	// open until kubectl exits, as a person's terminal does: the container
	// is not stdinOnce, and containerd's CRI attach then detaches the
	// attach's stdout and stderr as soon as its stdin ends (docker's
	// attach behaviour, the same under the kubelet), so a stdin that ended
	// at once would lose whatever the shell printed after containerd saw
	// its end.
	stdin, err := cmd.StdinPipe() // closed by Wait once kubectl exits
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "echo attached-$((40+2)); cat /proc/1/cmdline; echo; sleep 2; exit 3\n"); err != nil {
		t.Fatal(err)
	}
	// kubectl ends when the shell's exit ends the attach.
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kubectl debug -i: %v\n%s", err, out.String())
	}
	got := strings.ReplaceAll(out.String(), "\x00", " ") // cmdline's arguments end in NULs
	if !strings.Contains(got, "attached-42") || !strings.Contains(got, "sleep 3600") {
		t.Errorf("kubectl debug -i printed %q, want the attached shell's output, the target's sleep among it", got)
	}
	logs := strings.ReplaceAll(kubectl(t, cp, "logs", "target", "-c", "dbg"), "\x00", " ")
	if !strings.Contains(logs, "attached-42") || !strings.Contains(logs, "sleep 3600") {
		t.Errorf("kubectl logs of dbg = %q, want the output of the attached commands, the target's sleep among it", logs)
	}

	var pod *v1.Pod
	waitFor(t, time.Minute, "dbg terminated with 3 in ephemeralContainerStatuses", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "target", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		for _, st := range p.Status.EphemeralContainerStatuses {
			if st.Name == "dbg" && st.State.Terminated != nil && st.State.Terminated.ExitCode == 3 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", p.Status.EphemeralContainerStatuses)
	})
	for _, st := range pod.Status.EphemeralContainerStatuses {
		if st.RestartCount != 0 {
			t.Errorf("dbg restarted: %+v", st)
		}
	}
	var dbg int
	for _, c := range n.containers(string(pod.UID)) {
		if c.Metadata.Name == "dbg" {
			dbg++
		}
	}
	if dbg != 1 {
		t.Errorf("the runtime has %d dbg containers, want 1 (never restarted)", dbg)
	}
	if app := findStatus(pod, "app"); app.RestartCount != 0 || app.State.Running == nil {
		t.Errorf("the target was disturbed: %+v", app)
	}
}
