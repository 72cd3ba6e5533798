package stats

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fakeProcBusy is the busy time of fakeProc's cpu line: user, nice,
// system, irq, softirq and steal ticks of 10 ms.
const fakeProcBusy = (100 + 20 + 300 + 6 + 7 + 8) * 10 * uint64(time.Millisecond)

func TestCgroupCPUUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree func(*testing.T) string
		file string // the pod's counter, relative to the mount
	}{
		{"v1", fakeV1, filepath.Join("cpu,cpuacct", podCg, "cpuacct.usage")},
		{"v2", fakeV2, filepath.Join(podCg, "cpu.stat")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.tree(t)
			cg, err := detectCgroupFS(root)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := cg.cpuUsage(podCg); err != nil || got != 2*uint64(time.Second) {
				t.Errorf("cpuUsage(%s) = %d, %v; want 2 s in nanoseconds", podCg, got, err)
			}
			missing := "/kubepods/podgone"
			if _, err := cg.cpuUsage(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
				t.Errorf("cpuUsage(%s) error = %v, want not-exist naming the cgroup's file", missing, err)
			}
			file := filepath.Join(root, tc.file)
			writeFile(t, file, "garbage\n")
			if _, err := cg.cpuUsage(podCg); err == nil || !strings.Contains(err.Error(), file) {
				t.Errorf("cpuUsage of an unreadable counter: %v, want an error naming %s", err, file)
			}
		})
	}
	t.Run("v1 without cpuacct", func(t *testing.T) {
		root := t.TempDir()
		mkdir(t, filepath.Join(root, "memory", podCg))
		cg, _ := detectCgroupFS(root)
		if _, err := cg.cpuUsage(podCg); err == nil || !strings.Contains(err.Error(), "no cpuacct hierarchy") {
			t.Errorf("cpuUsage = %v, want an error naming the missing hierarchy", err)
		}
	})
}

func TestRootCPUUsage(t *testing.T) {
	rootV1 := filepath.Join("cpu,cpuacct", "cpuacct.usage")
	for _, tc := range []struct {
		name    string
		tree    func(*testing.T) string
		breaks  func(t *testing.T, cgroups, proc string)
		want    uint64
		wantErr string // a file the error must name
	}{
		{name: "v1 root cgroup", tree: fakeV1, want: 50 * uint64(time.Second)},
		{name: "v2 root cgroup", tree: fakeV2, want: 50 * uint64(time.Second)},
		{
			name: "v1 root without cpuacct.usage: /proc/stat", tree: fakeV1, want: fakeProcBusy,
			breaks: func(t *testing.T, cgroups, _ string) { remove(t, filepath.Join(cgroups, rootV1)) },
		},
		{
			name: "v1 without a cpuacct hierarchy: /proc/stat", tree: fakeV1, want: fakeProcBusy,
			breaks: func(t *testing.T, cgroups, _ string) { remove(t, filepath.Join(cgroups, "cpu,cpuacct")) },
		},
		{
			name: "v2 root without cpu.stat: /proc/stat", tree: fakeV2, want: fakeProcBusy,
			breaks: func(t *testing.T, cgroups, _ string) { remove(t, filepath.Join(cgroups, "cpu.stat")) },
		},
		{
			name: "a root counter that cannot be parsed is an error, not a fallback", tree: fakeV2, wantErr: "/cpu.stat",
			breaks: func(t *testing.T, cgroups, _ string) {
				writeFile(t, filepath.Join(cgroups, "cpu.stat"), "user_usec 1\n")
			},
		},
		{
			name: "neither", tree: fakeV1, wantErr: "/stat",
			breaks: func(t *testing.T, cgroups, proc string) {
				remove(t, filepath.Join(cgroups, rootV1))
				remove(t, filepath.Join(proc, "stat"))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cgroups, proc := tc.tree(t), fakeProc(t)
			if tc.breaks != nil {
				tc.breaks(t, cgroups, proc)
			}
			cg, err := detectCgroupFS(cgroups)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rootCPUUsage(cg, proc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("rootCPUUsage = %d, %v; want an error naming %s", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("rootCPUUsage = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestParseProcStatCPU(t *testing.T) {
	const tick = 10 * uint64(time.Millisecond)
	for _, tc := range []struct {
		name, data string
		want       uint64
		wantErr    bool
	}{
		{name: "busy = user nice system irq softirq steal", data: "cpu  1 2 3 1000 1000 4 5 6 0 0\ncpu0 1 2 3 1000 1000 4 5 6 0 0\n", want: 21 * tick},
		{name: "guest time is in user already", data: "cpu  10 0 0 0 0 0 0 0 7 3\n", want: 10 * tick},
		{name: "no guest fields", data: "cpu  1 1 1 1 1 1 1 1\n", want: 6 * tick},
		{name: "cpu line after others", data: "intr 5\ncpu 0 0 1 0 0 0 0 0\n", want: tick},
		{name: "no steal field", data: "cpu  1 1 1 1 1 1 1\n", wantErr: true},
		{name: "not a number", data: "cpu  1 x 1 1 1 1 1 1\n", wantErr: true},
		{name: "only per-CPU lines", data: "cpu0 1 1 1 1 1 1 1 1\n", wantErr: true},
		{name: "empty", data: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStatCPU("/proc/stat", []byte(tc.data))
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "/proc/stat") {
					t.Errorf("parseProcStatCPU = %d, %v; want an error naming the file", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseProcStatCPU = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestSumCPU(t *testing.T) {
	now := metav1.NewTime(testNow)
	cpu := func(usage, rate *uint64) statsapi.ContainerStats {
		return statsapi.ContainerStats{CPU: &statsapi.CPUStats{UsageCoreNanoSeconds: usage, UsageNanoCores: rate}}
	}
	for _, tc := range []struct {
		name      string
		ctrs      []statsapi.ContainerStats
		wantNil   bool
		wantUsage *uint64
		wantRate  *uint64
	}{
		{name: "no containers", wantNil: true},
		{name: "no container reports cpu", ctrs: []statsapi.ContainerStats{{}, {}}, wantNil: true},
		{name: "all rated", ctrs: []statsapi.ContainerStats{cpu(u64(10), u64(3)), cpu(u64(20), u64(4))}, wantUsage: u64(30), wantRate: u64(7)},
		{name: "one without a rate", ctrs: []statsapi.ContainerStats{cpu(u64(10), u64(3)), cpu(u64(20), nil)}, wantUsage: u64(30)},
		{name: "one without cpu", ctrs: []statsapi.ContainerStats{cpu(u64(10), u64(3)), {}}, wantUsage: u64(10)},
		{name: "a zero rate is a rate", ctrs: []statsapi.ContainerStats{cpu(u64(10), u64(0))}, wantUsage: u64(10), wantRate: u64(0)},
		{name: "rates without usage", ctrs: []statsapi.ContainerStats{cpu(nil, u64(5))}, wantRate: u64(5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sumCPU(tc.ctrs, now)
			if tc.wantNil {
				if got != nil {
					t.Errorf("sumCPU = %+v, want nil", got)
				}
				return
			}
			if got == nil {
				t.Fatal("sumCPU = nil")
			}
			eq(t, "usage", got.UsageCoreNanoSeconds, tc.wantUsage)
			eq(t, "rate", got.UsageNanoCores, tc.wantRate)
			if !got.Time.Equal(&now) {
				t.Errorf("time %v, want %v", got.Time, now)
			}
		})
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}
