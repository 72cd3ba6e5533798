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
	cpu      time.Duration // user + system, of the process and its reaped children
	rssBytes uint64
	hwmBytes uint64 // peak RSS since start or the last resetPeak
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

// parseStatus reads VmRSS and VmHWM, in bytes, from /proc/<pid>/status.
func parseStatus(data []byte) (rss, hwm uint64, err error) {
	found := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", key, err)
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("VmRSS or VmHWM missing")
	}
	return rss, hwm, nil
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
	rss, hwm, err := parseStatus(status)
	if err != nil {
		return procSample{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	s := procSample{cpu: self, rssBytes: rss, hwmBytes: hwm}
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
