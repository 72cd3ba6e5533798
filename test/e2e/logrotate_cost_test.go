package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLogRotationCost is a measurement, not a check: with
// BERTH_LOGROT_COST=<maxSize, e.g. 1Mi or -1 for off> it runs 10 pods of 10
// containers, each logging about 40 KB/s, for 90 s, and prints berth's CPU
// time over that window and the size of the pod logs directory. Without the
// variable it is skipped (it proves nothing by passing).
func TestLogRotationCost(t *testing.T) {
	maxSize := os.Getenv("BERTH_LOGROT_COST")
	if maxSize == "" {
		t.Skip("a measurement: set BERTH_LOGROT_COST=1Mi (or -1 for rotation off) to run it")
	}
	const pods, perPod, window = 10, 10, 90 * time.Second
	n := startNode(t, "--config", writeConfig(t, fmt.Sprintf(`
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerLogMaxSize: "%s"
containerLogMaxFiles: 3
maxPods: 200
`, maxSize)))
	pad := strings.Repeat("z", 92)
	for p := range pods {
		var ctrs strings.Builder
		for c := range perPod {
			fmt.Fprintf(&ctrs, `
  - name: c%d
    image: %s
    command: ["sh", "-c", "while true; do yes \"l-%s\" | head -n 300; sleep 1; done"]`, c, busybox, pad)
		}
		n.writeManifest(fmt.Sprintf("log%d.yaml", p), fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: log%d}
spec:
  containers:%s
`, p, ctrs.String()))
	}
	for p := range pods {
		n.waitRunning(fmt.Sprintf("log%d", p), 10*time.Minute)
	}
	cpu0, size0 := processCPU(t, n.pid), dirBytes(n.podLogs)
	start := time.Now()
	time.Sleep(window)
	cpu1, size1 := processCPU(t, n.pid), dirBytes(n.podLogs)
	elapsed := time.Since(start)
	logs, _ := filepath.Glob(filepath.Join(n.podLogs, "*", "*", "*"))
	t.Logf("containerLogMaxSize %s, %d containers: berth CPU %.2fs over %.0fs (%.1f%% of a core); pod logs %d -> %d bytes (%d files)",
		maxSize, pods*perPod, cpu1-cpu0, elapsed.Seconds(), 100*(cpu1-cpu0)/elapsed.Seconds(), size0, size1, len(logs))
}

// processCPU is the user and system CPU time of pid, in seconds.
func processCPU(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the whole line.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

func dirBytes(dir string) int64 {
	var total int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	return total
}
