package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// deprecationLine matches a warning containerd logs for a deprecated config
// key or plugin, or for a config it had to migrate at start-up.
var deprecationLine = regexp.MustCompile(`level=warn.*(?i:deprecat|migrat|outdated)`)

// containerd2Flags runs berth on the containerd of dir. Disk eviction and
// image GC are off: on a shared test machine near its disk thresholds they
// would remove the imported busybox before the pod uses it.
func containerd2Flags(dir string) []string {
	return []string{"--containerd-binary", filepath.Join(dir, "containerd"),
		"--eviction-hard", "memory.available<1Mi", "--image-gc-high-threshold", "100"}
}

// TestContainerdBinaryRunsContainerd2 starts berth with --containerd-binary
// naming the containerd 2 of its own directory, with nothing added to PATH:
// the CRI must report containerd 2, the pod's shim must be that directory's,
// and the config berth wrote must be containerd 2's own version (3), read
// without a deprecation warning in containerd.log.
func TestContainerdBinaryRunsContainerd2(t *testing.T) {
	dir := containerd2Dir(t)
	n := startNodeWithRuntime(t, "", "", containerd2Flags(dir)...)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := n.cri.Version(ctx)
	if err != nil {
		t.Fatalf("CRI Version: %v", err)
	}
	if !strings.HasPrefix(strings.TrimPrefix(v.RuntimeVersion, "v"), "2.") {
		t.Fatalf("runtime is %s %s, want containerd 2 from %s", v.RuntimeName, v.RuntimeVersion, dir)
	}

	n.writeManifest("c2.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: c2}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
`, busybox))
	pod := n.waitRunning("c2", 2*time.Minute)
	if out := strings.TrimSpace(n.exec(pod, "app", "echo", "ok")); out != "ok" {
		t.Fatalf("exec in the pod: %q", out)
	}

	wantShim := filepath.Join(dir, "containerd-shim-runc-v2")
	var shims []string
	for _, p := range processesFrom(n.root) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid))
		if err == nil && strings.HasSuffix(exe, "containerd-shim-runc-v2") {
			shims = append(shims, exe)
		}
	}
	if len(shims) == 0 {
		t.Fatalf("no shim of %s runs", n.root)
	}
	for _, exe := range shims {
		if exe != wantShim {
			t.Errorf("shim %s runs, want %s (the one beside --containerd-binary)", exe, wantShim)
		}
	}

	cfg, err := os.ReadFile(filepath.Join(n.root, "containerd", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), "\nversion = 2\n") {
		t.Errorf("config.toml is containerd 1's version 2:\n%s", cfg)
	}
	logData, err := os.ReadFile(filepath.Join(n.root, "containerd", "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(logData), "\n") {
		if deprecationLine.MatchString(line) {
			t.Errorf("containerd.log warns: %s", line)
		}
	}
}

// TestContainerd2AdoptedAfterCrash kills berth with SIGKILL, leaving its
// containerd 2 and pod running, and starts it again: berth must adopt that
// containerd (it learns the snapshotter from it, which containerd 2's CRI
// status no longer names) and keep the pod running.
func TestContainerd2AdoptedAfterCrash(t *testing.T) {
	dir := containerd2Dir(t)
	n := startNodeWithRuntime(t, "", "", containerd2Flags(dir)...)
	n.writeManifest("keep.yaml", fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: keep}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
`, busybox))
	before := n.waitRunning("keep", 2*time.Minute)
	n.kill9()
	waitFor(t, 30*time.Second, "berth to exit", func() (bool, string) { return n.pid == 0 || !alive(n.pid), "" })
	n.start()
	after := n.waitRunning("keep", 2*time.Minute)
	if b, a := containerID(t, before, "app"), containerID(t, after, "app"); b != a {
		t.Errorf("the container was replaced across berth's restart: %s, then %s", b, a)
	}
}
