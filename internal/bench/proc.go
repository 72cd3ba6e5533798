package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, which the
// kernel fixes at 100 for user space on every architecture berth runs on.
const userHZ = 100

// procSample is one reading of a process from /proc.
type procSample struct {
	cpu time.Duration // user + system, of the process and its reaped children
	memStatus
}

// memStatus is a process's memory from /proc/<pid>/status, in bytes.
type memStatus struct {
	rssBytes uint64
	hwmBytes uint64 // peak RSS since start or the last resetPeak
	// anonBytes is the anonymous part of the RSS (RssAnon): what the
	// process allocated. The rest is mostly its executable's pages, which
	// the page cache shares and can reclaim: a Go binary of 100 MB maps
	// some 45 MB of itself.
	anonBytes uint64
}

// parseStat reads user, system and reaped children's time from the
// contents of /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so the fields are counted from its closing parenthesis.
func parseStat(data []byte) (self, children time.Duration, err error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("no command name in %q", data)
	}
	// After ") " the fields start at field 3 (state); utime is field 14.
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 15 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 15", len(fields))
	}
	var ticks [4]uint64
	for i := range ticks {
		v, err := strconv.ParseUint(fields[11+i], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("field %d: %w", 14+i, err)
		}
		ticks[i] = v
	}
	tick := time.Second / userHZ
	return time.Duration(ticks[0]+ticks[1]) * tick, time.Duration(ticks[2]+ticks[3]) * tick, nil
}

// parseStatus reads VmRSS, VmHWM and RssAnon from /proc/<pid>/status;
// the first two must be there (a zombie has neither).
func parseStatus(data []byte) (memStatus, error) {
	var m memStatus
	fields := map[string]*uint64{"VmRSS": &m.rssBytes, "VmHWM": &m.hwmBytes, "RssAnon": &m.anonBytes}
	found := map[string]bool{}
	for line := range strings.SplitSeq(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		dst, wanted := fields[key]
		if !ok || !wanted {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s: %w", key, err)
		}
		*dst = kb << 10
		found[key] = true
	}
	if !found["VmRSS"] || !found["VmHWM"] {
		return m, fmt.Errorf("VmRSS or VmHWM missing")
	}
	return m, nil
}

// readProc samples pid. withChildren adds the CPU of its reaped children:
// a shim's runc invocations (exec probes) are its children.
func readProc(pid int, withChildren bool) (procSample, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return procSample{}, err
	}
	self, children, err := parseStat(stat)
	if err != nil {
		return procSample{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return procSample{}, err
	}
	mem, err := parseStatus(status)
	if err != nil {
		return procSample{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	s := procSample{cpu: self, memStatus: mem}
	if withChildren {
		s.cpu += children
	}
	return s, nil
}

// resetPeak restarts pid's VmHWM from its current RSS (clear_refs 5), so
// that a window's peak is the window's own.
func resetPeak(pid int) error {
	return os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
}

// pidsWithArg lists the processes whose command line holds arg and whose
// executable's name starts with prefix: the shims of one containerd are
// those whose -address is under its root.
func pidsWithArg(prefix, arg string) []int {
	var out []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), prefix) || !strings.Contains(string(data), arg) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
