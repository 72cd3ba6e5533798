package e2e

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Rotation settings of TestLogRotation, and the most the writer below can
// write per second: it sleeps half a second after each chunk of about 1 MB.
const (
	rotMaxSize  = 1 << 20
	rotMaxFiles = 3
	rotInterval = 3 * time.Second
	rotChunks   = 100
	rotRate     = 2 << 20 // bytes per second, an upper bound by construction
)

// rotationConfig is the KubeletConfiguration of TestLogRotation.
const rotationConfig = `
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerLogMaxSize: 1Mi
containerLogMaxFiles: 3
containerLogMonitorInterval: 3s
`

// chattyPod writes about 100 MB to its log (rotChunks chunks of 7000 lines
// of 100 bytes, about 1 MB each with the CRI prefix), once /tmp/go exists,
// then ends with marker lines and a tick every five seconds.
func chattyPod() string {
	pad := strings.Repeat("x", 88)
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: chatty}
spec:
  restartPolicy: Never
  containers:
  - name: out
    image: %s
    command: ["sh", "-c", "until [ -e /tmp/go ]; do sleep 0.1; done; i=0; while [ $i -lt %d ]; do yes \"chunk-$i-%s\" | head -n 7000; i=$((i+1)); sleep 0.5; done; for j in 1 2 3; do echo the-end-$j; done; while true; do echo tick; sleep 5; done"]
`, busybox, rotChunks, pad)
}

// A container writing about 100 MB of logs fast, with containerLogMaxSize
// 1Mi and containerLogMaxFiles 3: its log directory never holds more than
// maxFiles files (one more while a file is being compressed), rotated files
// are compressed, berth logs shows its latest lines and berth logs -f
// follows it across every rotation.
//
// The bound on the directory's size: the rotator looks every interval, so a
// file can grow past maxSize by what the container writes until the next
// look. Two files can be that large, the one being written and the newest
// rotated one, which stays uncompressed as the kubelet leaves it; the
// compressed ones are tiny. With the writer's rate at most rotRate (by its
// sleeps) and the look delayed by a loaded machine by up to 5s past the
// interval, the bound is maxFiles*maxSize + 2*rotRate*(interval+5s), about
// 35 MB: a third of what the container writes, all of which stays without
// rotation.
func TestLogRotation(t *testing.T) {
	n := startNode(t, "--config", writeConfig(t, rotationConfig))
	n.writeManifest("chatty.yaml", chattyPod())
	pod := "chatty-" + nodeName
	n.waitRunning("chatty", 2*time.Minute)
	logDir := containerLogDir(t, n, pod, "out")

	// berth logs -f from the start, into a file: 100 MB.
	followed := filepath.Join(t.TempDir(), "followed")
	stopFollow := n.followLogs(t, pod, followed)
	defer stopFollow()

	sampler := startDirSampler(logDir)
	if _, stderr, code := n.berthRun(t, "", "exec", pod, "--", "touch", "/tmp/go"); code != 0 {
		t.Fatalf("berth exec touch /tmp/go: %d %s", code, stderr)
	}
	waitFor(t, 5*time.Minute, "the container to write its 100 MB", func() (bool, string) {
		return uncompressedLogsContain(logDir, "the-end-3"), fmt.Sprint(listSizes(t, logDir))
	})
	// Two rounds more: the last chunk's file is rotated if it grew past
	// maxSize, and the one before compressed.
	time.Sleep(2*rotInterval + time.Second)
	samples := sampler.stop()

	bound := int64(rotMaxFiles*rotMaxSize) + 2*int64(rotRate)*int64((rotInterval+5*time.Second)/time.Second)
	t.Logf("log directory: at most %d bytes (bound %d) in at most %d files over %d samples; now %v",
		samples.maxBytes, bound, samples.maxFiles, samples.count, listSizes(t, logDir))
	if samples.maxBytes > bound {
		t.Errorf("the log directory held %d bytes at one point, over the bound %d (%d files then: %v)",
			samples.maxBytes, bound, samples.filesAtMax, samples.namesAtMax)
	}
	if samples.maxFiles > rotMaxFiles+1 {
		t.Errorf("the log directory held %d files at one point (%v), want at most %d (+1 being compressed)",
			samples.maxFiles, samples.namesAtMaxFiles, rotMaxFiles)
	}
	checkRotatedFiles(t, logDir)

	// The latest lines, though the current file may have just been rotated.
	out, err := n.berth("logs", pod, "--tail", "30")
	if err != nil || !strings.Contains(out, "the-end-1\nthe-end-2\nthe-end-3\n") {
		t.Errorf("berth logs --tail 30 = %q, %v; want the last marker lines", out, err)
	}
	// The follower saw every chunk and the end: it went on across each
	// rotation.
	waitFor(t, time.Minute, "berth logs -f to show the end", func() (bool, string) {
		data, _ := os.ReadFile(followed)
		return strings.Contains(string(data), "the-end-3"), fmt.Sprintf("%d bytes", len(data))
	})
	stopFollow()
	if missing := missingChunks(t, followed); len(missing) > 0 {
		t.Errorf("berth logs -f lost chunks %v across the rotations", missing)
	}

	testRotationBadInput(t, n, pod, logDir)
}

// The managed containerd's own log, grown past containerLogMaxSize as a
// runtime logging every failed write on a full disk grows it, is copied
// aside, compressed at the next rotation, and emptied in place, where
// containerd goes on writing.
func TestLogRotationRuntimeLog(t *testing.T) {
	n := startNode(t, "--config", writeConfig(t, rotationConfig))
	n.writeManifest("chatty.yaml", chattyPod())
	n.waitRunning("chatty", 2*time.Minute)
	path := filepath.Join(n.root, "containerd", "containerd.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := "runtime-log-flood " + strings.Repeat("y", 80) + "\n"
	for round := range 3 {
		if _, err := f.WriteString(strings.Repeat(line, 3*rotMaxSize/len(line))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, fmt.Sprintf("containerd's log to be rotated (round %d)", round), func() (bool, string) {
			info, err := os.Stat(path)
			return err == nil && info.Size() < rotMaxSize, fmt.Sprint(listSizes(t, filepath.Dir(path)))
		})
	}
	var rotated []string
	for name := range listSizes(t, filepath.Dir(path)) {
		if strings.HasPrefix(name, "containerd.log.") {
			rotated = append(rotated, name)
		}
	}
	if len(rotated) == 0 || len(rotated) > rotMaxFiles-1 {
		t.Errorf("rotated runtime logs %v: want 1 to %d", rotated, rotMaxFiles-1)
	}
	// containerd still writes to the emptied file: its descriptor is the
	// same file, appending.
	if _, stderr, code := n.berthRun(t, "", "exec", "chatty-"+nodeName, "--", "true"); code != 0 {
		t.Fatalf("berth exec after the runtime's log was rotated: %d %s", code, stderr)
	}
}

// testRotationBadInput removes the log file under berth, then makes its
// directory immutable: each is reported, the container keeps running, and
// the next round recovers.
func testRotationBadInput(t *testing.T, n *node, pod, logDir string) {
	current := filepath.Join(logDir, "0.log")
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the removed log to be created again and written", func() (bool, string) {
		data, err := os.ReadFile(current)
		return err == nil && strings.Contains(string(data), "tick"), fmt.Sprint(err)
	})

	// An immutable directory: nothing can be renamed or created in it.
	if out, err := exec.Command("chattr", "+i", logDir).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i %s: %v %s", logDir, err, out)
	}
	immutable := true
	unfreeze := func() {
		if immutable {
			if out, err := exec.Command("chattr", "-i", logDir).CombinedOutput(); err != nil {
				t.Errorf("chattr -i %s: %v %s", logDir, err, out)
			}
			immutable = false
		}
	}
	defer unfreeze()
	before := len(n.berthLog())
	since := func() string { return n.berthLog()[before:] }
	// Past maxSize, so that the rotator tries.
	if _, stderr, code := n.berthRun(t, "", "exec", pod, "--", "sh", "-c", "yes burst | head -c 2000000 >/proc/1/fd/1"); code != 0 {
		t.Fatalf("berth exec: %d %s", code, stderr)
	}
	waitFor(t, time.Minute, "rotation to fail for three rounds", func() (bool, string) {
		return strings.Count(since(), "container log rotation still failing") >= 2, ""
	})
	if c := strings.Count(since(), "container log rotation failed"); c != 1 {
		t.Errorf("the failure was logged %d times over three rounds, want once", c)
	}
	if p := n.pod("chatty"); p == nil || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("the container does not run on: %s", describe(p))
	}
	unfreeze()
	waitFor(t, time.Minute, "rotation to recover", func() (bool, string) {
		return strings.Contains(since(), "container log rotation recovered"), fmt.Sprint(listSizes(t, logDir))
	})
	waitFor(t, time.Minute, "the log to be small again and written", func() (bool, string) {
		info, err := os.Stat(current)
		return err == nil && info.Size() > 0 && info.Size() < rotMaxSize, fmt.Sprint(listSizes(t, logDir))
	})
	checkRotatedFiles(t, logDir)
}

// uncompressedLogsContain reports whether a log file of dir that is not
// compressed holds s.
func uncompressedLogsContain(dir, s string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".gz") {
			continue
		}
		if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && strings.Contains(string(data), s) {
			return true
		}
	}
	return false
}

// containerLogDir finds the directory of a container's log files.
func containerLogDir(t *testing.T, n *node, pod, container string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(n.podLogs, "*_"+pod+"_*", container))
	if err != nil || len(matches) != 1 {
		t.Fatalf("the log directory of %s/%s: %v %v", pod, container, matches, err)
	}
	return matches[0]
}

// followLogs runs berth logs -f into path until the returned function is
// called.
func (n *node) followLogs(t *testing.T, pod, path string) func() {
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := n.berthCmd(ctx, "logs", "-f", pod)
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			cmd.Wait()
			out.Close()
		})
	}
}

// checkRotatedFiles checks the shape the rotator leaves: the current log,
// at most maxFiles-1 rotated files of which all but the newest compressed,
// each a valid gzip file of CRI lines.
func checkRotatedFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rotated []string
	for _, e := range entries {
		if e.Name() != "0.log" && !strings.HasSuffix(e.Name(), ".tmp") {
			rotated = append(rotated, e.Name())
		}
	}
	if len(rotated) == 0 || len(rotated) > rotMaxFiles-1 {
		t.Errorf("rotated files %v: want 1 to %d", rotated, rotMaxFiles-1)
	}
	for i, name := range rotated { // sorted: the newest last
		if i < len(rotated)-1 && !strings.HasSuffix(name, ".gz") {
			t.Errorf("rotated file %s is not compressed (all: %v)", name, rotated)
		}
		if strings.HasSuffix(name, ".gz") {
			checkGzipLog(t, filepath.Join(dir, name))
		}
	}
}

func checkGzipLog(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	s := bufio.NewScanner(zr)
	if !s.Scan() || !strings.Contains(s.Text(), " stdout F ") {
		t.Errorf("%s does not hold CRI lines: %q %v", path, s.Text(), s.Err())
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

// missingChunks lists the chunks of chattyPod of which no line is in the
// file at path.
func missingChunks(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make([]bool, rotChunks)
	s := bufio.NewScanner(f)
	for s.Scan() {
		var i int
		if _, err := fmt.Sscanf(s.Text(), "chunk-%d-", &i); err == nil && i >= 0 && i < rotChunks {
			seen[i] = true
		}
	}
	var missing []int
	for i, ok := range seen {
		if !ok {
			missing = append(missing, i)
		}
	}
	return missing
}

func listSizes(t *testing.T, dir string) map[string]int64 {
	entries, _ := os.ReadDir(dir)
	out := map[string]int64{}
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			out[e.Name()] = info.Size()
		}
	}
	return out
}

// dirSampler records the most a directory held, in bytes and in files, as
// often as it can read it.
type dirSampler struct {
	done    chan struct{}
	stopped chan dirSamples
}

type dirSamples struct {
	count           int
	maxBytes        int64
	filesAtMax      int
	namesAtMax      []string
	maxFiles        int
	namesAtMaxFiles []string
}

func startDirSampler(dir string) *dirSampler {
	s := &dirSampler{done: make(chan struct{}), stopped: make(chan dirSamples, 1)}
	go func() {
		var res dirSamples
		for {
			select {
			case <-s.done:
				s.stopped <- res
				return
			case <-time.After(50 * time.Millisecond):
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			var total int64
			var names []string
			for _, e := range entries {
				if info, err := e.Info(); err == nil {
					total += info.Size()
					names = append(names, fmt.Sprintf("%s=%d", e.Name(), info.Size()))
				}
			}
			res.count++
			if total > res.maxBytes {
				res.maxBytes, res.filesAtMax, res.namesAtMax = total, len(names), names
			}
			if len(names) > res.maxFiles {
				res.maxFiles, res.namesAtMaxFiles = len(names), names
			}
		}
	}()
	return s
}

func (s *dirSampler) stop() dirSamples {
	close(s.done)
	return <-s.stopped
}
