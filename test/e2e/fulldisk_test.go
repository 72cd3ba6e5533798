package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Settings of TestFullLogDisk. The rotation settings are those of
// TestLogRotation (checkRotatedFiles assumes its rotMaxFiles).
const (
	fullMaxSize  = rotMaxSize
	fullMaxFiles = rotMaxFiles
	fullInterval = rotInterval
	// fullFor is how long the log filesystem stays full.
	fullFor = 30 * time.Second
	// fullSlowRate bounds what the pod writes per second once slowed down:
	// a "tick-N" line of at most 16 bytes every 0.2 s, 50 bytes with the
	// CRI prefix.
	fullSlowRate = 5 * 50
)

// fullDiskConfig: the rotation of TestLogRotation, and eviction on memory
// only, so that no nodefs or imagefs threshold can evict the pod whatever
// this machine's disk holds: the point is the log path under a full disk.
const fullDiskConfig = `
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerLogMaxSize: 1Mi
containerLogMaxFiles: 3
containerLogMonitorInterval: 3s
evictionHard:
  memory.available: 1Mi
`

// fullDiskPod writes about 1 MB/s of base64 lines (which compress to three
// quarters of their size, so that compressing a rotated file needs nearly
// as much room as it holds) until /tmp/slow exists, then a numbered tick
// line five times a second.
func fullDiskPod() string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: filler}
spec:
  restartPolicy: Never
  containers:
  - name: out
    image: %s
    command: ["sh", "-c", "while [ ! -e /tmp/slow ]; do head -c 64000 /dev/urandom | base64; sleep 0.05; done; i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done"]
`, busybox)
}

// A full log filesystem, as on a node whose /var/log fills up: the pod
// logs directory is on a 16 MB tmpfs that the test fills to the last byte
// and keeps full for 30 s, while the node's root dir (berth's and the
// managed containerd's own logs, containerd's state) stays on the disk, as
// in the measurement, so that what they log about the failure can
// be counted. (With both on one full filesystem neither could log at all.)
//
// The filesystem is filled when the pod's log directory holds one rotated
// file, not compressed yet, and a current log past containerLogMaxSize: the
// next rotation must compress the rotated file first, which needs room, so
// every round fails until space returns.
//
// While full: berth's API answers, the container runs on, not restarted,
// and berth logs the failure once (a warning) and then at most once per
// round (a debug line), not once per line the container writes; berth's
// CPU shows no goroutine spinning. Once the filler is removed: rotation
// recovers, the directory is back within maxFiles×maxSize plus what was
// written past maxSize, and berth logs shows new lines.
func TestFullLogDisk(t *testing.T) {
	logFS := mountSmallTmpfs(t, "16m")
	podLogs := filepath.Join(logFS, "pods")
	n := startNode(t, "--config", writeConfig(t, fullDiskConfig), "--pod-logs-dir", podLogs)
	n.podLogs = podLogs // the flag given last wins
	testFullDisk(t, n, logFS, true)
}

// The same with the node's whole root dir on one small tmpfs, pod logs,
// containerd's state and berth's and containerd's own logs included, all
// full at once: berth's API and the pod go on and everything recovers.
// What berth logs while full cannot be written, so it is not counted.
func TestFullNodeDisk(t *testing.T) {
	n := startNodeOnTmpfs(t, "64m", "--config", writeConfig(t, fullDiskConfig))
	testFullDisk(t, n, n.root, false)
}

// testFullDisk runs the pod of fullDiskPod on n, fills fs, on which the pod
// logs are, for fullFor, then frees it. countable says whether berth's and
// containerd's own logs are elsewhere, so that what they log while full
// can be counted.
func testFullDisk(t *testing.T, n *node, fs string, countable bool) {
	n.writeManifest("filler.yaml", fullDiskPod())
	pod := "filler-" + nodeName
	n.waitRunning("filler", 2*time.Minute)
	logDir := containerLogDir(t, n, pod, "out")

	var atFill map[string]int64
	waitFor(t, 2*time.Minute, "one rotated file, not compressed, and a log past maxSize", func() (bool, string) {
		atFill = listSizes(t, logDir)
		return len(atFill) == 2 && !anyHasSuffix(atFill, ".gz", ".tmp") && atFill["0.log"] >= fullMaxSize, fmt.Sprint(atFill)
	})
	berthBefore := len(n.berthLog())
	ctrdBefore := countRuntimeLogLines(t, n, "Fail to write")
	cpuBefore := processCPU(t, n.pid)
	fillPath := filepath.Join(fs, "filler")
	fill := startFiller(t, fillPath)
	defer fill.stop()
	filledAt := time.Now()
	slowed := true
	if _, stderr, code := n.berthRun(t, "", "exec", pod, "--", "touch", "/tmp/slow"); code != 0 {
		if countable {
			t.Fatalf("berth exec on a full log filesystem: %d %s", code, stderr)
		}
		// runc writes its exec state on the full filesystem: it fails, and
		// the pod goes on writing fast (its writes failing) until space
		// returns.
		t.Logf("berth exec on a full node filesystem: %d %s", code, stderr)
		slowed = false
	}
	t.Logf("filled %s with %d bytes; the log directory then: %v", fs, fill.written(), listSizes(t, logDir))

	checkServingWhileFull(t, n, fs)
	elapsed := time.Since(filledAt)
	cpu := time.Duration((processCPU(t, n.pid) - cpuBefore) * float64(time.Second))
	t.Logf("full for %v: berth used %v of CPU; the log directory: %v", elapsed.Round(time.Second), cpu, listSizes(t, logDir))
	// A goroutine spinning on the failure would use a core; the whole of
	// berth (relists, probes, API) uses a few percent of one.
	if cpu > elapsed/2 {
		t.Errorf("berth used %v of CPU in %v on a full disk: something spins", cpu, elapsed)
	}
	if countable {
		sinceFill := n.berthLog()[berthBefore:]
		checkFailureLogged(t, sinceFill, elapsed)
		ctrdLines := countRuntimeLogLines(t, n, "Fail to write") - ctrdBefore
		t.Logf("berth's log grew by %d lines (%d bytes); containerd logged at least %d \"Fail to write\" lines (one per line the container wrote); its log files hold %d bytes",
			strings.Count(sinceFill, "\n"), len(sinceFill), ctrdLines, runtimeLogBytes(t, n))
		// containerd logs one line per failed write (its CRI log writer
		// does), which berth cannot change, but berth's copy-truncate keeps
		// the file within its policy: checked every second, one more file
		// while the oldest is compressed, and a second's flood.
		if b := runtimeLogBytes(t, n); b > int64(fullMaxFiles+1)*fullMaxSize+2*fullMaxSize {
			t.Errorf("containerd's log files hold %d bytes on a full log filesystem", b)
		}
	}

	maxTick := lastTick(logDir)
	fill.stop()
	if err := os.Remove(fillPath); err != nil {
		t.Fatal(err)
	}
	if !slowed {
		// Exec works again once space is back, and the writer slows down;
		// but what it wrote fast meanwhile is not bounded by the test, so
		// the directory's size is not checked.
		waitFor(t, time.Minute, "berth exec to work again", func() (bool, string) {
			_, stderr, code := n.berthRun(t, "", "exec", pod, "--", "touch", "/tmp/slow")
			return code == 0, stderr
		})
		atFill = nil
	}
	checkRecovery(t, n, pod, logDir, berthBefore, atFill, maxTick)
}

// checkServingWhileFull checks every second for fullFor that the
// filesystem is full, berth's API answers and the container runs on.
func checkServingWhileFull(t *testing.T, n *node, fs string) {
	t.Helper()
	var notFull int
	for end := time.Now().Add(fullFor); time.Now().Before(end); time.Sleep(time.Second) {
		if _, err := n.get("/healthz"); err != nil {
			t.Errorf("/healthz on a full log filesystem: %v", err)
		}
		p := n.pod("filler") // GET /pods; fails the test if it does not answer
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil ||
			p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("the container does not run on, or was restarted, on a full log filesystem: %s", describe(p))
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(fs, &st); err != nil {
			t.Fatal(err)
		}
		if st.Bavail != 0 {
			notFull++
		}
	}
	if notFull > 0 {
		t.Errorf("the log filesystem had room at %d of the checks: the test did not keep it full", notFull)
	}
}

// checkFailureLogged checks what berth logged about the failed rotations
// while the filesystem was full for elapsed. The rotator runs one round per
// interval, and each round of a lasting failure costs one line: the warning
// the first time, a debug line after. Any other line naming the full disk
// is counted too. The bound: one per round that can have run, plus two for
// a round under way at either end; the container wrote thousands of lines
// meanwhile, so a line per write would be far over it.
func checkFailureLogged(t *testing.T, since string, elapsed time.Duration) {
	t.Helper()
	failed := strings.Count(since, "container log rotation failed")
	still := strings.Count(since, "container log rotation still failing")
	var enospc int
	for line := range strings.Lines(since) {
		if strings.Contains(line, "no space left on device") {
			enospc++
		}
	}
	rounds := int(elapsed/fullInterval) + 1
	t.Logf("berth logged, while full: %d \"rotation failed\", %d \"still failing\", %d lines naming ENOSPC, over at most %d rounds",
		failed, still, enospc, rounds)
	if failed != 1 {
		t.Errorf("the failed rotation was reported %d times, want once (then a debug line per round)", failed)
	}
	if failed+still > rounds+2 || enospc > rounds+2 {
		t.Errorf("berth logged %d lines about rotation and %d naming ENOSPC in %d rounds: want at most one per round (+2)",
			failed+still, enospc, rounds)
	}
	if still == 0 {
		t.Errorf("no round after the first reported the lasting failure")
	}
}

// checkRecovery checks, once space is back, that rotation recovers, the
// directory shrinks within the policy (unless atFill is nil: not known)
// and berth logs shows new lines.
func checkRecovery(t *testing.T, n *node, pod, logDir string, berthBefore int, atFill map[string]int64, maxTick int) {
	t.Helper()
	freedAt := time.Now()
	waitFor(t, time.Minute, "rotation to recover", func() (bool, string) {
		return strings.Contains(n.berthLog()[berthBefore:], "container log rotation recovered"), fmt.Sprint(listSizes(t, logDir))
	})
	waitFor(t, time.Minute, "the log to be rotated and written again", func() (bool, string) {
		sizes := listSizes(t, logDir)
		return sizes["0.log"] > 0 && sizes["0.log"] < fullMaxSize, fmt.Sprint(sizes)
	})
	t.Logf("recovered %v after space returned; the log directory: %v", time.Since(freedAt).Round(time.Second), listSizes(t, logDir))
	// maxFiles files of maxSize, plus what the fast writer had written past
	// maxSize into each file before the filesystem filled up (at most an
	// interval's worth each: the first rotated file holds what it wrote in
	// an interval), and what the slow writer writes in an interval
	// (delayed by up to 5 s).
	bound := int64(fullMaxFiles*fullMaxSize) + fullSlowRate*int64((fullInterval+5*time.Second)/time.Second)
	for _, size := range atFill {
		bound += max(size-fullMaxSize, 0)
	}
	var total int64
	for _, size := range listSizes(t, logDir) {
		total += size
	}
	if atFill != nil && total > bound {
		t.Errorf("the log directory holds %d bytes after recovery, over %d: %v", total, bound, listSizes(t, logDir))
	}
	checkRotatedFiles(t, logDir)
	waitFor(t, time.Minute, "berth logs to show lines written after the recovery", func() (bool, string) {
		out, err := n.berth("logs", pod, "--tail", "20")
		return err == nil && lastTickIn(out) > maxTick, fmt.Sprintf("%q %v (last tick before: %d)", out, err, maxTick)
	})
	if _, err := n.get("/healthz"); err != nil {
		t.Errorf("/healthz after recovery: %v", err)
	}
	if p := n.pod("filler"); p == nil || p.Status.ContainerStatuses[0].State.Running == nil || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the container after recovery: %s", describe(p))
	}
	// Recovered means recovered: no failure logged since.
	at := len(n.berthLog())
	time.Sleep(2*fullInterval + time.Second)
	if rest := n.berthLog()[at:]; strings.Contains(rest, "container log rotation") && strings.Contains(rest, "fail") {
		t.Errorf("rotation fails again after recovery:\n%s", rest)
	}
}

// mountSmallTmpfs mounts a tmpfs of the given size on a new directory and
// unmounts and removes it when the test ends, after the node is cleaned up
// (cleanups run last-registered first).
func mountSmallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "berth-fulldisk-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		os.Remove(dir)
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("cleanup: unmount %s: %v", dir, err)
			return
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return dir
}

// filler fills a filesystem through one file and keeps it full: whatever
// the rotator or anyone frees is taken back within a tenth of a second.
type filler struct {
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
	mu      sync.Mutex
	n       int64
}

func startFiller(t *testing.T, path string) *filler {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fl := &filler{done: make(chan struct{}), stopped: make(chan struct{})}
	if err := fl.top(f); err != nil {
		f.Close()
		t.Fatal(err)
	}
	go func() {
		defer close(fl.stopped)
		defer f.Close()
		for {
			select {
			case <-fl.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := fl.top(f); err != nil {
				t.Errorf("filler: %v", err)
				return
			}
		}
	}()
	return fl
}

// top writes to f until the filesystem has no room left.
func (fl *filler) top(f *os.File) error {
	chunk := make([]byte, 64<<10)
	for {
		n, err := f.Write(chunk)
		fl.mu.Lock()
		fl.n += int64(n)
		fl.mu.Unlock()
		if errors.Is(err, syscall.ENOSPC) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (fl *filler) written() int64 {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.n
}

func (fl *filler) stop() {
	fl.once.Do(func() {
		close(fl.done)
		<-fl.stopped
	})
}

func anyHasSuffix(sizes map[string]int64, suffixes ...string) bool {
	for name := range sizes {
		for _, s := range suffixes {
			if strings.HasSuffix(name, s) {
				return true
			}
		}
	}
	return false
}

// runtimeLogFiles lists the managed containerd's log and its uncompressed
// rotated copies.
func runtimeLogFiles(t *testing.T, n *node) []string {
	matches, _ := filepath.Glob(filepath.Join(n.root, "containerd", "containerd.log*"))
	var out []string
	for _, m := range matches {
		if !strings.HasSuffix(m, ".gz") {
			out = append(out, m)
		}
	}
	return out
}

// countRuntimeLogLines counts the lines holding s in containerd's log and
// its uncompressed rotated copies: a lower bound of what it logged, as the
// oldest copies are compressed or removed.
func countRuntimeLogLines(t *testing.T, n *node, s string) int {
	var c int
	for _, path := range runtimeLogFiles(t, n) {
		data, _ := os.ReadFile(path)
		c += strings.Count(string(data), s)
	}
	return c
}

func runtimeLogBytes(t *testing.T, n *node) int64 {
	matches, _ := filepath.Glob(filepath.Join(n.root, "containerd", "containerd.log*"))
	var total int64
	for _, m := range matches {
		if info, err := os.Stat(m); err == nil {
			total += info.Size()
		}
	}
	return total
}

var tickRE = regexp.MustCompile(`tick-(\d+)`)

// lastTick returns the highest tick line number in the uncompressed logs
// of dir, -1 if none.
func lastTick(dir string) int {
	last := -1
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".gz") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			last = max(last, lastTickIn(s.Text()))
		}
		f.Close()
	}
	return last
}

func lastTickIn(s string) int {
	last := -1
	for _, m := range tickRE.FindAllStringSubmatch(s, -1) {
		if i, err := strconv.Atoi(m[1]); err == nil {
			last = max(last, i)
		}
	}
	return last
}
