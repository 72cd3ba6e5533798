package cm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// machine writes fixture files in a temp dir, also the root dir.
func machine(t *testing.T, meminfo, online, pidMax, threadsMax string) (MachineFiles, string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return MachineFiles{
		Meminfo:    write("meminfo", meminfo),
		OnlineCPUs: write("online", online),
		PidMax:     write("pid_max", pidMax),
		ThreadsMax: write("threads-max", threadsMax),
	}, dir
}

func TestMachineCapacity(t *testing.T) {
	files, root := machine(t, "MemTotal:       24576000 kB\nMemFree: 1 kB\n", "0-3,8\n", "32768\n", "1000\n")
	got, err := MachineCapacity(files, root, 110)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[v1.ResourceName]int64{
		v1.ResourceCPU:    5,
		v1.ResourceMemory: 24576000 * 1024,
		v1.ResourcePods:   110,
		ResourcePID:       1000, // threads-max binds before pid_max here
	} {
		if q := got[name]; q.Value() != want {
			t.Errorf("%s = %s, want %d", name, q.String(), want)
		}
	}
	if q := got[v1.ResourceEphemeralStorage]; q.Value() <= 0 {
		t.Errorf("ephemeral-storage = %s, want the size of the temp dir's filesystem", q.String())
	}

	files, root = machine(t, "MemTotal: 1024 kB\n", "0\n", "4096\n", "192730\n")
	if got, err := MachineCapacity(files, root, 10); err != nil {
		t.Fatal(err)
	} else if p := got[ResourcePID]; p.Value() != 4096 {
		t.Errorf("pid = %s, want pid_max 4096", p.String())
	}
}

func TestMachineCapacityErrors(t *testing.T) {
	type sources struct {
		MachineFiles
		RootDir string
	}
	tests := []struct {
		name   string
		modify func(t *testing.T, s *sources)
		want   string
	}{
		{"no MemTotal", func(t *testing.T, s *sources) { rewrite(t, s.Meminfo, "MemFree: 1 kB\n") }, "no MemTotal line"},
		{"bad MemTotal", func(t *testing.T, s *sources) { rewrite(t, s.Meminfo, "MemTotal: lots kB\n") }, `MemTotal "lots"`},
		{"no meminfo", func(t *testing.T, s *sources) { s.Meminfo = filepath.Join(t.TempDir(), "none") }, "read memory capacity"},
		{"bad cpu list", func(t *testing.T, s *sources) { rewrite(t, s.OnlineCPUs, "0-x\n") }, "/online: "},
		{"no online CPU", func(t *testing.T, s *sources) { rewrite(t, s.OnlineCPUs, "\n") }, "no online CPU"},
		{"bad pid_max", func(t *testing.T, s *sources) { rewrite(t, s.PidMax, "many\n") }, `"many": want a positive integer`},
		{"no threads-max", func(t *testing.T, s *sources) { s.ThreadsMax = filepath.Join(t.TempDir(), "none") }, "read the task limit"},
		{"no root dir", func(t *testing.T, s *sources) { s.RootDir = filepath.Join(t.TempDir(), "none") }, "ephemeral-storage capacity: statfs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, root := machine(t, "MemTotal: 1024 kB\n", "0-1\n", "32768\n", "1000\n")
			src := sources{files, root}
			tt.modify(t, &src)
			_, err := MachineCapacity(src.MachineFiles, src.RootDir, 110)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestHostMachineCapacity reads this host's real files (the zero
// MachineFiles).
func TestHostMachineCapacity(t *testing.T) {
	got, err := MachineCapacity(MachineFiles{}, t.TempDir(), 110)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, ResourcePID} {
		if q := got[name]; q.Sign() <= 0 {
			t.Errorf("%s = %s, want > 0", name, q.String())
		}
	}
}

func rewrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
