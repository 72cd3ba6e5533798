package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// BenchmarkPodCgroupsHost reads what one stats pass reads of 100 pods'
// cgroups on this host's own cgroup filesystem (kernfs, whose files cost
// what tmpfs files do not): each pod's memory, CPU and process count, and
// its container's page cache and CPU throttling. It needs root; the
// cgroups it makes, one pod cgroup with a sandbox and a container cgroup
// in each hierarchy the reads use, are removed after it.
func BenchmarkPodCgroupsHost(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("makes cgroups: run as root")
	}
	cg, err := detectCgroupFS("/sys/fs/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	top := fmt.Sprintf("/berth-stats-bench-%d", os.Getpid())
	var pods []string
	for i := range 100 {
		pod := fmt.Sprintf("%s/pod%03d", top, i)
		pods = append(pods, pod)
		for _, p := range []string{pod + "/sandbox", pod + "/container"} {
			makeCgroup(b, cg, p)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, pod := range pods {
			if _, err := cg.memory(pod); err != nil {
				b.Fatal(err)
			}
			if _, err := cg.cpuUsage(pod); err != nil {
				b.Fatal(err)
			}
			if _, err := cg.processCount(pod); err != nil {
				b.Fatal(err)
			}
			if _, err := cg.memoryCache(pod + "/container"); err != nil {
				b.Fatal(err)
			}
			if _, err := cg.cfs(pod + "/container"); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// makeCgroup makes cgroup p (and its parents) in every hierarchy the
// stats read, and removes them, deepest first, when b ends.
func makeCgroup(b *testing.B, cg cgroupFS, p string) {
	b.Helper()
	seen := map[string]bool{}
	for _, ctl := range []string{"memory", "cpu", "cpuacct", "pids"} {
		dir, err := cg.dir(ctl, p)
		if err != nil || seen[dir] {
			continue // no such v1 hierarchy, or one co-mounted with another
		}
		seen[dir] = true
		var made []string
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(d); err == nil {
				break
			}
			made = append(made, d)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		slices.Sort(made) // parents first: Cleanup runs last-in first-out
		for _, d := range made {
			b.Cleanup(func() {
				if err := os.Remove(d); err != nil {
					b.Errorf("remove cgroup %s: %v", d, err)
				}
			})
		}
	}
}
