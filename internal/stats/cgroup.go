package stats

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupFS says where each controller's files are: one tree on cgroup v2,
// one hierarchy per controller (or co-mounted group) on v1.
type cgroupFS struct {
	mount string
	v2    bool
	// hierarchies maps a v1 controller to its hierarchy's directory.
	hierarchies map[string]string
}

// detectCgroupFS looks at the cgroup mount: a cgroup.controllers file at
// its top is the unified v2 tree; otherwise its subdirectories are v1
// hierarchies named after their controllers ("memory", "cpu,cpuacct"). A
// hybrid host, with v2 at mount/unified beside them, is v1: the
// controllers are on the v1 side. Files, and the "cpu" -> "cpu,cpuacct"
// style symlinks, are not hierarchies.
func detectCgroupFS(mount string) (cgroupFS, error) {
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		return cgroupFS{mount: mount, v2: true}, nil
	}
	entries, err := os.ReadDir(mount)
	if err != nil {
		return cgroupFS{}, fmt.Errorf("cgroup filesystem: %w", err)
	}
	c := cgroupFS{mount: mount, hierarchies: map[string]string{}}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		for _, ctl := range strings.Split(e.Name(), ",") {
			c.hierarchies[ctl] = filepath.Join(mount, e.Name())
		}
	}
	return c, nil
}

// dir is the directory of cgroup p (a cgroupfs path such as
// "/kubepods/burstable/pod<uid>") that holds controller's files.
func (c cgroupFS) dir(controller, p string) (string, error) {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return "", fmt.Errorf("cgroup path %q: must be absolute and clean", p)
	}
	if c.v2 {
		return filepath.Join(c.mount, p), nil
	}
	h := c.hierarchies[controller]
	if h == "" {
		return "", fmt.Errorf("cgroup %s: %s has no %s hierarchy", p, c.mount, controller)
	}
	return filepath.Join(h, p), nil
}

// memory reads a cgroup's memory the way cadvisor does for the kubelet:
// working set = usage − inactive file; RSS is total_rss on v1 and anon on
// v2. On v1 the hierarchical (total_*) counters are used, since a pod's
// processes live in its child cgroups.
func (c cgroupFS) memory(p string) (memoryReading, error) {
	dir, err := c.dir("memory", p)
	if err != nil {
		return memoryReading{}, err
	}
	stat, err := readFlatKeyed(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return memoryReading{}, err
	}
	if c.v2 {
		usage, err := readUint(filepath.Join(dir, "memory.current"))
		if err != nil {
			return memoryReading{}, err
		}
		limit, limited, err := readMax(filepath.Join(dir, "memory.max"))
		if err != nil {
			return memoryReading{}, err
		}
		return v2Memory(usage, stat, limitOf(limit, limited)), nil
	}
	usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return memoryReading{}, err
	}
	limit, err := readUint(filepath.Join(dir, "memory.limit_in_bytes"))
	if err != nil {
		return memoryReading{}, err
	}
	return v1Memory(usage, stat, limitOf(limit, true)), nil
}

func v1Memory(usage uint64, stat map[string]uint64, limit *uint64) memoryReading {
	return memoryReading{
		Usage:      usage,
		WorkingSet: workingSet(usage, stat["total_inactive_file"]),
		RSS:        stat["total_rss"],
		PageFaults: stat["total_pgfault"],
		MajorFault: stat["total_pgmajfault"],
		Limit:      limit,
	}
}

func v2Memory(usage uint64, stat map[string]uint64, limit *uint64) memoryReading {
	return memoryReading{
		Usage:      usage,
		WorkingSet: workingSet(usage, stat["inactive_file"]),
		RSS:        stat["anon"],
		PageFaults: stat["pgfault"],
		MajorFault: stat["pgmajfault"],
		Limit:      limit,
	}
}

// v2RootMemory is the node's memory on cgroup v2, whose root cgroup has
// memory.stat but no memory.current: like runc (and so cadvisor), usage is
// MemTotal − MemFree from /proc/meminfo, and the working set takes the root
// memory.stat's inactive_file off it.
func v2RootMemory(meminfo, stat map[string]uint64) memoryReading {
	usage := meminfo["MemTotal"] - min(meminfo["MemFree"], meminfo["MemTotal"])
	return v2Memory(usage, stat, nil)
}

// processCount is the number of processes in the cgroup and its
// descendants, the kubelet's ProcessStats.ProcessCount, by which
// PID-pressure eviction ranks pods. It is not pids.current, which counts
// tasks: every thread of every process. cadvisor counts the lines of the
// cgroup's own cgroup.procs, but a pod cgroup's own lists nothing: its
// processes live in its containers' child cgroups, so the whole subtree
// is read. On v1 the pod cgroup is in every hierarchy; the cpu one is
// cadvisor's.
func (c cgroupFS) processCount(p string) (uint64, error) {
	var dir string
	var err error
	for _, ctl := range []string{"cpu", "pids", "memory"} {
		if dir, err = c.dir(ctl, p); err == nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	var lists [][]byte
	if err := collectProcs(dir, &lists); err != nil {
		return 0, fmt.Errorf("process count of cgroup %s: %w", p, err)
	}
	return countProcesses(lists), nil
}

// collectProcs appends the cgroup.procs of the cgroup at dir and of every
// cgroup below it to lists. The cgroup at dir must exist; one below it
// removed meanwhile held no processes.
func collectProcs(dir string, lists *[][]byte) error {
	children, err := subdirs(dir)
	if err != nil {
		return err
	}
	data, err := readFile(filepath.Join(dir, "cgroup.procs"))
	switch {
	case err == nil:
		*lists = append(*lists, data)
	// Removed since it was listed; or a v2 threaded cgroup, which refuses
	// to list processes: its threaded domain, an ancestor, lists them.
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.EOPNOTSUPP):
	default:
		return err
	}
	for _, name := range children {
		if err := collectProcs(filepath.Join(dir, name), lists); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// countProcesses is the number of distinct PIDs in a set of cgroup.procs
// files. A process can be listed twice: on v1 its threads may sit in
// different cgroups, each listing it, and a v2 threaded domain lists the
// processes of its threaded children.
func countProcesses(lists [][]byte) uint64 {
	pids := map[string]bool{}
	for _, data := range lists {
		for _, pid := range bytes.Fields(data) {
			pids[string(pid)] = true
		}
	}
	return uint64(len(pids))
}

func readFlatKeyed(file string) (map[string]uint64, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	return parseFlatKeyed(file, data)
}

func readUint(file string) (uint64, error) {
	data, err := readFile(file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	return v, nil
}

// readMax reads a v2 limit file: a number, or "max" (limited = false).
func readMax(file string) (v uint64, limited bool, err error) {
	data, err := readFile(file)
	if err != nil {
		return 0, false, err
	}
	s := string(bytes.TrimSpace(data))
	if s == "max" {
		return 0, false, nil
	}
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", file, err)
	}
	return v, true, nil
}

// memoryCache is the page cache charged to the cgroup, as cAdvisor's
// container_memory_cache: total_cache on v1, file on v2.
func (c cgroupFS) memoryCache(p string) (uint64, error) {
	dir, err := c.dir("memory", p)
	if err != nil {
		return 0, err
	}
	file := filepath.Join(dir, "memory.stat")
	stat, err := readFlatKeyed(file)
	if err != nil {
		return 0, err
	}
	key := "total_cache"
	if c.v2 {
		key = "file"
	}
	v, ok := stat[key]
	if !ok {
		return 0, fmt.Errorf("read %s: no %s", file, key)
	}
	return v, nil
}

// cfs reads the CPU bandwidth accounting of cpu.stat: nr_periods and
// nr_throttled on both versions, throttled time in nanoseconds on v1
// (throttled_time) and microseconds on v2 (throttled_usec).
func (c cgroupFS) cfs(p string) (*CFSStats, error) {
	dir, err := c.dir("cpu", p)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "cpu.stat")
	stat, err := readFlatKeyed(file)
	if err != nil {
		return nil, err
	}
	return cfsOf(file, stat, c.v2)
}

func cfsOf(file string, stat map[string]uint64, v2 bool) (*CFSStats, error) {
	throttled, unit := "throttled_time", uint64(1)
	if v2 {
		throttled, unit = "throttled_usec", uint64(time.Microsecond)
	}
	for _, k := range []string{"nr_periods", "nr_throttled", throttled} {
		if _, ok := stat[k]; !ok {
			return nil, fmt.Errorf("read %s: no %s", file, k)
		}
	}
	return &CFSStats{Periods: stat["nr_periods"], ThrottledPeriods: stat["nr_throttled"], ThrottledNanos: stat[throttled] * unit}, nil
}

// firstProcess is a process of the cgroup itself, the first its
// cgroup.procs lists: any of them is in the namespaces of the container
// the cgroup is.
func (c cgroupFS) firstProcess(p string) (int, error) {
	dir, err := c.dir("memory", p)
	if err != nil {
		return 0, err
	}
	file := filepath.Join(dir, "cgroup.procs")
	data, err := readFile(file)
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(data)
	if len(f) == 0 {
		return 0, fmt.Errorf("%s lists no process", file)
	}
	pid, err := strconv.Atoi(string(f[0]))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	return pid, nil
}
