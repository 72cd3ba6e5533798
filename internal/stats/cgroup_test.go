package stats

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const podCg = "/kubepods/burstable/podu1"

// Each fake pod cgroup holds three processes in two child cgroups, and
// nine tasks (threads) in its pids.current, which must not be counted.
const fakePodProcesses = 3

func writeProcs(t *testing.T, pod string) {
	t.Helper()
	writeFile(t, filepath.Join(pod, "cgroup.procs"), "")
	writeFile(t, filepath.Join(pod, "sandbox", "cgroup.procs"), "100\n")
	writeFile(t, filepath.Join(pod, "ctr", "cgroup.procs"), "200\n201\n")
}

// fakeV1 builds a cgroup v1 mount: memory and pids hierarchies, cpu and
// cpuacct co-mounted with the usual alias symlinks left out. The root has
// used 50 s of CPU, the pod 2 s.
func fakeV1(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	mem := filepath.Join(root, "memory")
	writeFile(t, filepath.Join(mem, "memory.usage_in_bytes"), "6000000\n")
	writeFile(t, filepath.Join(mem, "memory.limit_in_bytes"), "9223372036854771712\n")
	writeFile(t, filepath.Join(mem, "memory.stat"), "cache 100\nrss 50\ntotal_inactive_file 2000000\ntotal_rss 1500000\ntotal_pgfault 30\ntotal_pgmajfault 3\n")
	pod := filepath.Join(mem, podCg)
	writeFile(t, filepath.Join(pod, "memory.usage_in_bytes"), "300000\n")
	writeFile(t, filepath.Join(pod, "memory.limit_in_bytes"), "1048576\n")
	writeFile(t, filepath.Join(pod, "memory.stat"), "total_inactive_file 100000\ntotal_rss 150000\ntotal_pgfault 12\ntotal_pgmajfault 1\n")
	writeFile(t, filepath.Join(root, "pids", podCg, "pids.current"), "9\n")
	cpu := filepath.Join(root, "cpu,cpuacct")
	writeFile(t, filepath.Join(cpu, "cpuacct.usage"), "50000000000\n")
	writeFile(t, filepath.Join(cpu, podCg, "cpuacct.usage"), "2000000000\n")
	writeProcs(t, filepath.Join(cpu, podCg))
	return root
}

// fakeV2 builds a unified cgroup v2 mount, with the same CPU usage as
// fakeV1's.
func fakeV2(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpu memory pids\n")
	writeFile(t, filepath.Join(root, "memory.stat"), "anon 1000000\nfile 3000000\ninactive_file 2000000\npgfault 40\npgmajfault 4\n")
	writeFile(t, filepath.Join(root, "cpu.stat"), "usage_usec 50000000\nuser_usec 30000000\nsystem_usec 20000000\nnice_usec 0\n")
	pod := filepath.Join(root, podCg)
	writeFile(t, filepath.Join(pod, "memory.current"), "300000\n")
	writeFile(t, filepath.Join(pod, "memory.max"), "max\n")
	writeFile(t, filepath.Join(pod, "memory.stat"), "anon 150000\ninactive_file 100000\npgfault 12\npgmajfault 1\n")
	writeFile(t, filepath.Join(pod, "pids.current"), "9\n")
	writeFile(t, filepath.Join(pod, "cpu.stat"), "usage_usec 2000000\nuser_usec 1500000\nsystem_usec 500000\n")
	writeProcs(t, pod)
	return root
}

func TestDetectCgroupFS(t *testing.T) {
	v1, err := detectCgroupFS(fakeV1(t))
	if err != nil {
		t.Fatal(err)
	}
	if v1.v2 || v1.hierarchies["memory"] == "" || v1.hierarchies["cpuacct"] != v1.hierarchies["cpu"] {
		t.Errorf("v1 tree detected as %+v", v1)
	}
	v2, err := detectCgroupFS(fakeV2(t))
	if err != nil {
		t.Fatal(err)
	}
	if !v2.v2 {
		t.Errorf("v2 tree detected as %+v", v2)
	}
	if _, err := detectCgroupFS(filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing mount: %v, want not-exist", err)
	}
}

func TestCgroupMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree func(*testing.T) string
		want memoryReading
	}{
		{"v1", fakeV1, memoryReading{Usage: 300000, WorkingSet: 200000, RSS: 150000, PageFaults: 12, MajorFault: 1, Limit: ptr(uint64(1048576))}},
		{"v2", fakeV2, memoryReading{Usage: 300000, WorkingSet: 200000, RSS: 150000, PageFaults: 12, MajorFault: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg, err := detectCgroupFS(tc.tree(t))
			if err != nil {
				t.Fatal(err)
			}
			got, err := cg.memory(podCg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("memory(%s) = %+v, want %+v", podCg, got, tc.want)
			}
			missing := "/kubepods/podgone"
			if _, err := cg.memory(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
				t.Errorf("memory(%s) error = %v, want not-exist naming the cgroup's file", missing, err)
			}
		})
	}
}

func TestCgroupPathMustBeClean(t *testing.T) {
	cg, err := detectCgroupFS(fakeV2(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"kubepods", "/kubepods/../../etc", "/kubepods/"} {
		if _, err := cg.memory(p); err == nil || !strings.Contains(err.Error(), "absolute and clean") {
			t.Errorf("memory(%q) error = %v, want a refusal", p, err)
		}
	}
}

func TestProcessCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree func(*testing.T) string
	}{
		{"v1", fakeV1},
		{"v2", fakeV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg, err := detectCgroupFS(tc.tree(t))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := cg.processCount(podCg); err != nil || n != fakePodProcesses {
				t.Errorf("processCount = %d, %v; want the %d processes of cgroup.procs, not pids.current's threads", n, err, fakePodProcesses)
			}
			if _, err := cg.processCount("/kubepods/podgone"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("processCount of a missing cgroup: %v, want not-exist", err)
			}
		})
	}
	t.Run("v1 without a cpu hierarchy: another one", func(t *testing.T) {
		root := t.TempDir()
		writeProcs(t, filepath.Join(root, "memory", podCg))
		cg, _ := detectCgroupFS(root)
		if n, err := cg.processCount(podCg); err != nil || n != fakePodProcesses {
			t.Errorf("processCount = %d, %v; want %d", n, err, fakePodProcesses)
		}
	})
}

func TestCountProcesses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lists []string
		want  uint64
	}{
		{"none", nil, 0},
		{"empty cgroups", []string{"", "\n"}, 0},
		{"one per line", []string{"1\n2\n3\n"}, 3},
		{"no final newline", []string{"1\n2"}, 2},
		{"across cgroups", []string{"1\n", "2\n3\n"}, 3},
		{"a process listed by two cgroups", []string{"1\n2\n", "2\n"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lists [][]byte
			for _, l := range tc.lists {
				lists = append(lists, []byte(l))
			}
			if got := countProcesses(lists); got != tc.want {
				t.Errorf("countProcesses(%q) = %d, want %d", tc.lists, got, tc.want)
			}
		})
	}
}
