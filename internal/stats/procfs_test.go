package stats

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeProc builds the procfs files the provider reads.
func fakeProc(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "meminfo"), "MemTotal:        8000000 kB\nMemFree:         2000000 kB\nMemAvailable:    5000000 kB\n")
	writeFile(t, filepath.Join(root, "stat"), "cpu  100 20 300 4000 50 6 7 8 9 10\ncpu0 50 10 150 2000 25 3 3 4 4 5\nctxt 99\nbtime 1700000000\nprocesses 42\n")
	writeFile(t, filepath.Join(root, "sys", "kernel", "pid_max"), "4194304\n")
	writeFile(t, filepath.Join(root, "sys", "kernel", "threads-max"), "63000\n")
	writeFile(t, filepath.Join(root, "loadavg"), "0.50 0.40 0.30 2/345 6789\n")
	return root
}

func TestReadMeminfo(t *testing.T) {
	m, err := readMeminfo(fakeProc(t))
	if err != nil {
		t.Fatal(err)
	}
	if m["MemTotal"] != 8000000*1024 || m["MemFree"] != 2000000*1024 {
		t.Errorf("meminfo = %v", m)
	}
	empty := t.TempDir()
	writeFile(t, filepath.Join(empty, "meminfo"), "MemFree: 1 kB\n")
	if _, err := readMeminfo(empty); err == nil || !strings.Contains(err.Error(), "MemTotal") {
		t.Errorf("meminfo without MemTotal: %v, want an error", err)
	}
}

func TestBootTime(t *testing.T) {
	got, err := bootTime(fakeProc(t))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("bootTime = %v", got)
	}
}

func TestMaxPID(t *testing.T) {
	proc := fakeProc(t)
	got, err := maxPID(proc)
	if err != nil || got == nil || *got != 63000 {
		t.Errorf("maxPID = %v, %v; want threads-max 63000, the smaller", got, err)
	}
	writeFile(t, filepath.Join(proc, "sys", "kernel", "threads-max"), "not a number\n")
	if got, err := maxPID(proc); err != nil || *got != 4194304 {
		t.Errorf("maxPID with threads-max unreadable = %v, %v; want pid_max", got, err)
	}
	if _, err := maxPID(t.TempDir()); err == nil {
		t.Error("maxPID with neither file: no error")
	}
}

func TestParseLoadavgTasks(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0.50 0.40 0.30 2/345 6789\n", 345, false},
		{"1.36 3.49 4.53 2/70000 3715089", 70000, false},
		{"0.50 0.40 0.30 2/345", 0, true},
		{"0.50 0.40 0.30 345 6789", 0, true},
		{"0.50 0.40 0.30 2/x 6789", 0, true},
	} {
		got, err := parseLoadavgTasks("loadavg", tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseLoadavgTasks(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := runningTasks(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("runningTasks without loadavg: %v, want not-exist", err)
	}
}
