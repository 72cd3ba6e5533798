package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// berth logs passes the kubelet's log options --since, --since-time and
// --limit-bytes (with --tail and --timestamps) to /containerLogs, which
// honours them: a container writes an early line, five seconds later a
// late one; the late line's own timestamp picks a cut between them for
// both forms of since, so nothing depends on when the test runs.
func TestLogsSinceAndLimitBytes(t *testing.T) {
	n := startNodeKeepingImages(t)
	n.writeManifest("talk.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: talk}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: out
    image: %s
    command: ["sh", "-c", "echo early-line; sleep 5; echo late-line; exec sleep 3600"]
`, busybox))
	pod := "talk-" + nodeName
	var stamped string
	waitFor(t, 2*time.Minute, "the late line", func() (bool, string) {
		out, err := n.berth("logs", pod, "--timestamps")
		stamped = out
		return err == nil && strings.Contains(out, "late-line"), fmt.Sprint(out, err, describe(n.pod("talk")))
	})
	var late time.Time
	for _, line := range strings.Split(stamped, "\n") {
		if ts, text, ok := strings.Cut(line, " "); ok && text == "late-line" {
			var err error
			if late, err = time.Parse(time.RFC3339Nano, ts); err != nil {
				t.Fatalf("timestamp of %q: %v", line, err)
			}
		}
	}
	if late.IsZero() {
		t.Fatalf("no timestamped late line in %q", stamped)
	}
	cut := late.Add(-2 * time.Second) // between the two lines, 5 s apart

	out, err := n.berth("logs", pod, "--since-time", cut.UTC().Format(time.RFC3339))
	if err != nil || out != "late-line\n" {
		t.Errorf("--since-time %s = %q, %v; want only the late line", cut.Format(time.RFC3339), out, err)
	}
	since := time.Duration(math.Ceil(time.Since(cut).Seconds())) * time.Second
	out, err = n.berth("logs", pod, "--since", since.String())
	if err != nil || out != "late-line\n" {
		t.Errorf("--since %s = %q, %v; want only the late line", since, out, err)
	}
	out, err = n.berth("logs", pod, "--since", "1h")
	if err != nil || out != "early-line\nlate-line\n" {
		t.Errorf("--since 1h = %q, %v; want both lines", out, err)
	}
	out, err = n.berth("logs", pod, "--limit-bytes", "5")
	if err != nil || out != "early" {
		t.Errorf("--limit-bytes 5 = %q, %v; want %q", out, err, "early")
	}
	out, err = n.berth("logs", pod, "--tail", "1", "--timestamps")
	if err != nil || !strings.HasSuffix(out, " late-line\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("--tail 1 --timestamps = %q, %v", out, err)
	}
	// Bad input is refused by the command, naming the flag.
	if out, err := n.berth("logs", pod, "--since", "1m", "--since-time", cut.UTC().Format(time.RFC3339)); err == nil ||
		!strings.Contains(err.Error(), "at most one") {
		t.Errorf("--since with --since-time = %q, %v; want refused", out, err)
	}
}
