package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Container logs are written in CRI format under podLogsDir and read back
// by `berth logs`, which follows a running container until it exits.
func TestLogs(t *testing.T) {
	n := startNode(t)
	n.writeManifest("talk.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: talk}
spec:
  restartPolicy: Never
  containers:
  - name: out
    image: %s
    command: ["sh", "-c", "for i in 1 2 3; do echo line-$i; echo err-$i >&2; sleep 1; done"]
`, busybox))
	waitFor(t, time.Minute, "the container to start", func() (bool, string) {
		p := n.pod("talk")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, "no status"
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Running != nil || cs.State.Terminated != nil, describe(p)
	})
	// -f returns when the container exits, with everything it wrote.
	out, err := n.berth("logs", "talk-"+nodeName, "-f")
	if err != nil {
		t.Fatalf("berth logs -f: %v", err)
	}
	for _, want := range []string{"line-1", "err-2", "line-3", "err-3"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	waitFor(t, 30*time.Second, "the pod to succeed", func() (bool, string) {
		p := n.pod("talk")
		return p != nil && p.Status.Phase == v1.PodSucceeded, describe(p)
	})
	// stdout and stderr reach the log through separate pipes, so only the
	// set of the last two lines is certain, not their order.
	out, err = n.berth("logs", "talk-"+nodeName, "--tail", "2")
	lines := strings.Fields(out)
	slices.Sort(lines)
	if err != nil || strings.Join(lines, ",") != "err-3,line-3" {
		t.Errorf("berth logs --tail 2 = %q, %v", out, err)
	}
}

// berth logs -f follows a container across its restarts: the lines of the
// instance running when it started, written after it started, then the
// next instance's from its start. --previous prints a whole earlier one.
func TestLogsFollowAcrossRestarts(t *testing.T) {
	n := startNode(t)
	// Each instance prints a token of its own, then a line 2s later.
	n.writeManifest("blink.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: blink}
spec:
  restartPolicy: Always
  containers:
  - name: out
    image: %s
    command: ["sh", "-c", "echo start-$(cut -c1-8 /proc/sys/kernel/random/uuid); sleep 2; echo end"]
`, busybox))
	waitFor(t, time.Minute, "the first instance to run", func() (bool, string) {
		p := n.pod("blink")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil &&
			p.Status.ContainerStatuses[0].RestartCount == 0, describe(p)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "berth"), "logs", "-f", "blink-"+nodeName)
	cmd.Env = append(os.Environ(), "BERTH_SERVER="+n.url(""), "BERTH_ROOT_DIR="+n.root)
	out := &lockedBuffer{}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	defer func() {
		cancel()
		<-exited
	}()
	// The restart waits out the crash back-off (10s for the first).
	tokens := regexp.MustCompile(`start-[0-9a-f]{8}`)
	waitFor(t, 2*time.Minute, "berth logs -f to show two instances", func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("berth logs -f returned while the pod restarts: %v\n%s\nstderr: %s", cmd.ProcessState, out.String(), stderr.String())
		default:
		}
		s := out.String()
		return len(tokens.FindAllString(s, -1)) >= 2, s
	})
	got := out.String()
	seen := tokens.FindAllString(got, -1)
	if seen[0] == seen[1] || !strings.HasPrefix(got, seen[0]+"\nend\n"+seen[1]+"\n") {
		t.Errorf("berth logs -f printed %q; want the first instance whole (written while it followed), then the second", got)
	}
	if p := n.pod("blink"); p == nil || p.Status.ContainerStatuses[0].RestartCount < 1 {
		t.Errorf("the container did not restart: %s", describe(p))
	}

	// Which instance is the previous one depends on whether the second
	// still runs; it is one of those followed, whole.
	prev, err := n.berth("logs", "--previous", "blink-"+nodeName)
	if err != nil {
		t.Fatalf("berth logs --previous: %v", err)
	}
	if !slices.ContainsFunc(seen, func(tok string) bool { return prev == tok+"\nend\n" }) {
		t.Errorf("berth logs --previous = %q, want one of the instances followed (%v), whole", prev, seen)
	}
}

// lockedBuffer is a buffer that a process's output goroutine writes while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A line the runtime cut short (what a full disk leaves in a CRI log file)
// is not the container's output: `berth logs` leaves it out, as the
// kubelet's ReadLogs does, and shows the lines around it.
func TestLogsLeaveOutCutLine(t *testing.T) {
	n := startNode(t)
	n.writeManifest("cut.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: cut}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: out
    image: %s
    command: ["sh", "-c", "echo one; while [ ! -e /tmp/go ]; do sleep 0.2; done; echo two; sleep 3600"]
`, busybox))
	var files []string
	waitFor(t, time.Minute, "the first line in the log file", func() (bool, string) {
		files, _ = filepath.Glob(filepath.Join(n.podLogs, "*_cut-*", "out", "0.log"))
		if len(files) != 1 {
			return false, fmt.Sprintf("log files %v", files)
		}
		data, _ := os.ReadFile(files[0])
		return strings.Contains(string(data), "one"), string(data)
	})
	f, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("2026-11-27T10:0\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := n.berthRun(t, "", "exec", "cut-"+nodeName, "--", "touch", "/tmp/go"); code != 0 {
		t.Fatalf("exec touch: %d %s", code, stderr)
	}
	waitFor(t, time.Minute, "the second line", func() (bool, string) {
		out, err := n.berth("logs", "cut-"+nodeName)
		if err != nil {
			return false, err.Error()
		}
		if strings.Contains(out, "2026-11-27") {
			t.Fatalf("the cut line is shown as output:\n%s", out)
		}
		return out == "one\ntwo\n", fmt.Sprintf("%q", out)
	})
}
