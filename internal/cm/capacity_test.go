package cm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// machine writes fixture files in a temp dir, also the root dir. Its
// hugepages directory does not exist: no huge pages unless a test makes it.
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
		Hugepages:  filepath.Join(dir, "hugepages"),
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
	if hp := hugepagesOf(got); hp != "" {
		t.Errorf("huge pages %s, want none without a hugepages directory", hp)
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

func TestMachineCapacityHugepages(t *testing.T) {
	tests := []struct {
		name  string
		sizes map[string]string // directory name → nr_hugepages; nil: no hugepages directory
		want  string
	}{
		{name: "no hugepages directory", want: ""},
		{name: "an empty hugepages directory", sizes: map[string]string{}, want: ""},
		{name: "2Mi pages, none allocated, still reported", sizes: map[string]string{"hugepages-2048kB": "0\n"}, want: "hugepages-2Mi=0"},
		{name: "512 pages of 2Mi", sizes: map[string]string{"hugepages-2048kB": "512\n"}, want: "hugepages-2Mi=1073741824"},
		{name: "1Gi pages", sizes: map[string]string{"hugepages-1048576kB": "2\n"}, want: "hugepages-1Gi=2147483648"},
		{
			name:  "both sizes, as on x86-64",
			sizes: map[string]string{"hugepages-2048kB": "512\n", "hugepages-1048576kB": "0\n"},
			want:  "hugepages-1Gi=0 hugepages-2Mi=1073741824",
		},
		{
			// arm64 with 4k base pages: the names are the sizes' BinarySI strings.
			name:  "sizes that are not whole MiB",
			sizes: map[string]string{"hugepages-64kB": "3\n", "hugepages-32768kB": "1\n"},
			want:  "hugepages-32Mi=33554432 hugepages-64Ki=196608",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, root := machine(t, "MemTotal: 8388608 kB\n", "0-1\n", "32768\n", "1000\n")
			if tt.sizes != nil {
				hugepagesDir(t, files.Hugepages, tt.sizes)
			}
			got, err := MachineCapacity(files, root, 110)
			if err != nil {
				t.Fatal(err)
			}
			if hp := hugepagesOf(got); hp != tt.want {
				t.Errorf("huge pages %q, want %q", hp, tt.want)
			}
			// Huge pages are reported beside memory, not taken from it:
			// Allocatable does that.
			if q := got[v1.ResourceMemory]; q.Value() != 8*gi {
				t.Errorf("memory = %s, want MemTotal", q.String())
			}
		})
	}
}

func TestMachineCapacityHugepagesErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"a word for a count", func(t *testing.T, dir string) {
			hugepagesDir(t, dir, map[string]string{"hugepages-2048kB": "many\n"})
		}, `hugepages-2048kB/nr_hugepages: "many": want a non-negative integer`},
		{"a negative count", func(t *testing.T, dir string) {
			hugepagesDir(t, dir, map[string]string{"hugepages-1048576kB": "-1\n"})
		}, `hugepages-1048576kB/nr_hugepages: "-1": want a non-negative integer`},
		{"an empty count", func(t *testing.T, dir string) {
			hugepagesDir(t, dir, map[string]string{"hugepages-2048kB": ""})
		}, `hugepages-2048kB/nr_hugepages: "": want a non-negative integer`},
		{"no nr_hugepages", func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "hugepages-2048kB"))
		}, "read the huge pages: open DIR/hugepages-2048kB/nr_hugepages"},
		{"a size in another unit", func(t *testing.T, dir string) {
			hugepagesDir(t, dir, map[string]string{"hugepages-2MB": "0\n"})
		}, "DIR/hugepages-2MB: want a directory named hugepages-<size>kB"},
		{"a size that is no number", func(t *testing.T, dir string) {
			hugepagesDir(t, dir, map[string]string{"hugepages-twokB": "0\n"})
		}, `DIR/hugepages-twokB: page size "two": want a positive number of kB`},
		{"a zero size", func(t *testing.T, dir string) {
			hugepagesDir(t, dir, map[string]string{"hugepages-0kB": "0\n"})
		}, `DIR/hugepages-0kB: page size "0": want a positive number of kB`},
		{"more bytes than a quantity holds", func(t *testing.T, dir string) {
			hugepagesDir(t, dir, map[string]string{"hugepages-1048576kB": "9223372036854775807\n"})
		}, "DIR/hugepages-1048576kB/nr_hugepages: 9223372036854775807 pages of 1073741824 bytes overflow a quantity"},
		{"a file where the directory should be", func(t *testing.T, dir string) {
			rewrite(t, dir, "")
		}, "read the huge page sizes: open DIR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, root := machine(t, "MemTotal: 1024 kB\n", "0-1\n", "32768\n", "1000\n")
			tt.setup(t, files.Hugepages)
			_, err := MachineCapacity(files, root, 110)
			want := strings.ReplaceAll(tt.want, "DIR", files.Hugepages)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want one containing %q", err, want)
			}
		})
	}
}

func TestHugepagesResource(t *testing.T) {
	for kb, want := range map[int64]v1.ResourceName{
		64:       "hugepages-64Ki",
		2048:     "hugepages-2Mi",
		32768:    "hugepages-32Mi",
		524288:   "hugepages-512Mi",
		1048576:  "hugepages-1Gi",
		16777216: "hugepages-16Gi",
	} {
		if got := hugepagesResource(kb * 1024); got != want {
			t.Errorf("%d kB: %q, want %q", kb, got, want)
		}
	}
}

// hugepagesDir makes a fixture /sys/kernel/mm/hugepages: one directory per
// size, holding its nr_hugepages.
func hugepagesDir(t *testing.T, dir string, sizes map[string]string) {
	t.Helper()
	mkdir(t, dir)
	for name, count := range sizes {
		mkdir(t, filepath.Join(dir, name))
		rewrite(t, filepath.Join(dir, name, "nr_hugepages"), count)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// hugepagesOf renders a capacity's hugepages-* entries, in name order.
func hugepagesOf(l v1.ResourceList) string {
	var parts []string
	for _, name := range sortedNames(l) {
		if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			q := l[name]
			parts = append(parts, fmt.Sprintf("%s=%d", name, q.Value()))
		}
	}
	return strings.Join(parts, " ")
}

func rewrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
