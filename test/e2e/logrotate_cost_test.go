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

// BenchmarkLogRotationCost measures, for containerLogMaxSize off (-1),
// 10Mi and 1Mi, berth's CPU and the size of the pod logs directory while 10
// pods of 10 containers each log about 40 KB/s for 90 s. It is a
// measurement, run by hand once per setting:
//
//	BERTH_BIN=$PWD/bin go test -run '^$' -bench LogRotationCost -benchtime 1x ./test/e2e/
func BenchmarkLogRotationCost(b *testing.B) {
	for _, maxSize := range []string{"-1", "10Mi", "1Mi"} {
		b.Run("maxSize="+maxSize, func(b *testing.B) {
			for b.Loop() {
				measureLogRotation(b, maxSize)
			}
		})
	}
}

func measureLogRotation(b *testing.B, maxSize string) {
	const pods, perPod, window = 10, 10, 90 * time.Second
	n := startNode(b, "--config", writeConfig(b, fmt.Sprintf(`
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
	cpu0, size0 := processCPU(b, n.pid), dirBytes(n.podLogs)
	start := time.Now()
	time.Sleep(window)
	cpu1, size1 := processCPU(b, n.pid), dirBytes(n.podLogs)
	elapsed := time.Since(start)
	logs, _ := filepath.Glob(filepath.Join(n.podLogs, "*", "*", "*"))
	b.Logf("containerLogMaxSize %s, %d containers: berth CPU %.2fs over %.0fs (%.1f%% of a core); pod logs %d -> %d bytes (%d files)",
		maxSize, pods*perPod, cpu1-cpu0, elapsed.Seconds(), 100*(cpu1-cpu0)/elapsed.Seconds(), size0, size1, len(logs))
	b.ReportMetric((cpu1-cpu0)/elapsed.Seconds(), "berth-cores")
	b.ReportMetric(float64(size1), "podlog-bytes")
}

// processCPU is the user and system CPU time of pid, in seconds.
func processCPU(t testing.TB, pid int) float64 {
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
