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

// processCount is the number of tasks in the cgroup: pids.current, the
// figure the pod's pids limit and the node's PID pressure both count.
// Without a pids controller, it counts the processes in cgroup.procs of
// the cgroup and its descendants instead.
func (c cgroupFS) processCount(p string) (uint64, error) {
	if dir, err := c.dir("pids", p); err == nil {
		n, err := readUint(filepath.Join(dir, "pids.current"))
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	var dir string
	var err error
	for _, ctl := range []string{"memory", "cpu", "pids"} {
		if dir, err = c.dir(ctl, p); err == nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(dir); err != nil {
		return 0, fmt.Errorf("process count of cgroup %s: %w", p, err)
	}
	var n uint64
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// A child cgroup removed while being walked holds no processes.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n += uint64(len(bytes.Fields(data)))
		return nil
	})
	if walkErr != nil {
		return 0, fmt.Errorf("process count of cgroup %s: %w", p, walkErr)
	}
	return n, nil
}

func readFlatKeyed(file string) (map[string]uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseFlatKeyed(file, data)
}

func readUint(file string) (uint64, error) {
	data, err := os.ReadFile(file)
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
	data, err := os.ReadFile(file)
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
