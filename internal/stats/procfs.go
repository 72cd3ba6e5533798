package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// readMeminfo reads <procFS>/meminfo, in bytes by field.
func readMeminfo(procFS string) (map[string]uint64, error) {
	file := filepath.Join(procFS, "meminfo")
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	m, err := parseMeminfo(file, data)
	if err != nil {
		return nil, err
	}
	if m["MemTotal"] == 0 {
		return nil, fmt.Errorf("read %s: no MemTotal", file)
	}
	return m, nil
}

// bootTime is when the node booted (the btime line of <procFS>/stat): the
// start time of the root cgroup, which is what the kubelet reports as the
// node's.
func bootTime(procFS string) (time.Time, error) {
	file := filepath.Join(procFS, "stat")
	data, err := readFile(file)
	if err != nil {
		return time.Time{}, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("btime ")); ok {
			secs, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("read %s: btime: %w", file, err)
			}
			return time.Unix(secs, 0), nil
		}
	}
	return time.Time{}, fmt.Errorf("read %s: no btime line", file)
}

// maxPID is the node's limit on tasks, the kubelet's way: the smaller of
// kernel.pid_max and kernel.threads-max, which both cap it. It is nil
// when neither can be read.
func maxPID(procFS string) (*int64, error) {
	var limit *int64
	var errs []error
	for _, name := range []string{"pid_max", "threads-max"} {
		file := filepath.Join(procFS, "sys", "kernel", name)
		v, err := readUint(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n := int64(v); limit == nil || n < *limit {
			limit = &n
		}
	}
	if limit == nil {
		return nil, fmt.Errorf("max PID: %v", errs)
	}
	return limit, nil
}

// runningTasks is the number of tasks on the node, from the fourth field of
// <procFS>/loadavg ("running/total"). The kubelet prefers it to sysinfo(2),
// whose count is 16 bits wide and wraps above 65535.
func runningTasks(procFS string) (int64, error) {
	file := filepath.Join(procFS, "loadavg")
	data, err := readFile(file)
	if err != nil {
		return 0, err
	}
	return parseLoadavgTasks(file, string(data))
}

func parseLoadavgTasks(file, s string) (int64, error) {
	fields := strings.Fields(s)
	if len(fields) < 5 {
		return 0, fmt.Errorf("read %s: %q has fewer than 5 fields", file, s)
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("read %s: field %q is not running/total", file, fields[3])
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	return n, nil
}

// machineFacts are the machine's facts that do not change while berth
// runs, read once: the number of logical CPUs, counted from cpuinfo's
// "processor" lines as cAdvisor counts them (the machine's, whatever
// berth's own CPU affinity), and its identity.
type machineFacts struct {
	once sync.Once
	info MachineInfo
}

func (m *machineFacts) get(procFS string) MachineInfo {
	m.once.Do(func() {
		if data, err := os.ReadFile(filepath.Join(procFS, "cpuinfo")); err == nil {
			m.info.Cores = countProcessors(data)
		}
		m.info.BootID = firstLine(filepath.Join(procFS, "sys", "kernel", "random", "boot_id"))
		m.info.MachineID = firstLine("/etc/machine-id")
		m.info.SystemUUID = firstLine("/sys/class/dmi/id/product_uuid")
	})
	return m.info
}

// firstLine is a one-line file's content, "" when it cannot be read.
func firstLine(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(line)
}

func countProcessors(data []byte) int {
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return n
}
