package stats

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     700       7    0    0    0     0          0         0      700       7    0    0    0     0       0          0
  eth0:   12345      20    1    0    0     0          0         0     6789      10    2    0    0     0       0          0
`

func TestParseNetDev(t *testing.T) {
	now := metav1.NewTime(testNow)
	for _, tc := range []struct {
		name, data string
		want       []statsapi.InterfaceStats
		wantErr    bool
	}{
		{"lo left out", netDev, []statsapi.InterfaceStats{{Name: "eth0", RxBytes: u64(12345), RxErrors: u64(1), TxBytes: u64(6789), TxErrors: u64(2)}}, false},
		{"headers only", "a\nb\n", nil, false},
		{"short line", "a\nb\neth0: 1 2 3\n", nil, true},
		{"not a number", "a\nb\neth0: x 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNetDev("net/dev", []byte(tc.data), now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d interfaces, want %d", len(got), len(tc.want))
			}
			for i := range got {
				w, g := tc.want[i], got[i]
				if g.Name != w.Name || *g.RxBytes != *w.RxBytes || *g.TxBytes != *w.TxBytes || *g.RxErrors != *w.RxErrors || *g.TxErrors != *w.TxErrors {
					t.Errorf("interface %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestParseMountSources(t *testing.T) {
	data := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"23 22 8:1 /var/lib /mnt rw - ext4 /dev/sda1-bind rw\n" +
		"24 22 0:5 / /dev rw - devtmpfs udev rw\n" +
		"garbage\n"
	got := parseMountSources([]byte(data))
	for dev, want := range map[uint64]string{mkdevOf(8, 1): "/dev/sda1", mkdevOf(0, 5): "udev"} {
		if got[dev] != want {
			t.Errorf("device %d = %q, want %q", dev, got[dev], want)
		}
	}
	if len(got) != 2 {
		t.Errorf("%d devices, want 2: %v", len(got), got)
	}
}

func TestCFSOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    map[string]uint64
		v2      bool
		want    CFSStats
		wantErr bool
	}{
		{"v1", map[string]uint64{"nr_periods": 10, "nr_throttled": 3, "throttled_time": 5000}, false, CFSStats{10, 3, 5000}, false},
		{"v2 in microseconds", map[string]uint64{"nr_periods": 10, "nr_throttled": 3, "throttled_usec": 5}, true, CFSStats{10, 3, 5000}, false},
		{"v2 without the cpu controller", map[string]uint64{"usage_usec": 5}, true, CFSStats{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfsOf("cpu.stat", tc.stat, tc.v2)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && *got != tc.want {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestCountProcessors(t *testing.T) {
	if n := countProcessors([]byte("processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\n")); n != 2 {
		t.Errorf("%d processors, want 2", n)
	}
}

func TestContainerFilesystems(t *testing.T) {
	limit := u64(1000)
	device := func(p string) string {
		return map[string]string{"/images": "/dev/a", "/logs": "/dev/a", "/other": "/dev/b"}[p]
	}
	cs := statsapi.ContainerStats{
		Rootfs: &statsapi.FsStats{UsedBytes: u64(10), CapacityBytes: limit},
		Logs:   &statsapi.FsStats{UsedBytes: u64(5), CapacityBytes: limit},
	}
	for _, tc := range []struct {
		name         string
		cs           statsapi.ContainerStats
		rootfs, logs string
		want         []FsSample
	}{
		{"one device sums", cs, "/images", "/logs", []FsSample{{"/dev/a", 15, limit}}},
		{"two devices", cs, "/images", "/other", []FsSample{{"/dev/a", 10, limit}, {"/dev/b", 5, limit}}},
		{"unknown usage left out", statsapi.ContainerStats{Logs: cs.Logs}, "/images", "/logs", []FsSample{{"/dev/a", 5, limit}}},
		{"nothing", statsapi.ContainerStats{}, "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := containerFilesystems(tc.cs, tc.rootfs, tc.logs, device)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Device != tc.want[i].Device || got[i].Usage != tc.want[i].Usage || got[i].Limit != tc.want[i].Limit {
					t.Errorf("filesystem %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestSnapshotSamples reads the fixture's node and checks what
// /metrics/cadvisor gets beyond the Summary, on both cgroup versions.
func TestSnapshotSamples(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		f := newFixture(t, v2)
		f.web.Spec.Containers[1].Image = "registry/side:1"
		f.web.Spec.Containers[1].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}
		side, sandbox := filepath.Join(podCg, "c-side"), filepath.Join(podCg, "s1")
		if v2 {
			writeFile(t, filepath.Join(f.cgroups, side, "memory.stat"), "inactive_file 500\nanon 1000\nfile 700\n")
			writeFile(t, filepath.Join(f.cgroups, side, "cpu.stat"), "usage_usec 1\nnr_periods 9\nnr_throttled 4\nthrottled_usec 2\n")
			writeFile(t, filepath.Join(f.cgroups, sandbox, "cgroup.procs"), "4242\n")
		} else {
			writeFile(t, filepath.Join(f.cgroups, "memory", side, "memory.stat"), "total_inactive_file 500\ntotal_rss 1000\ntotal_cache 700\n")
			writeFile(t, filepath.Join(f.cgroups, "cpu,cpuacct", side, "cpu.stat"), "nr_periods 9\nnr_throttled 4\nthrottled_time 2000\n")
			writeFile(t, filepath.Join(f.cgroups, "memory", sandbox, "cgroup.procs"), "4242\n")
		}
		writeFile(t, filepath.Join(f.proc, "4242", "net", "dev"), netDev)
		writeFile(t, filepath.Join(f.proc, "cpuinfo"), "processor\t: 0\nprocessor\t: 1\nprocessor\t: 2\n")
		p := f.provider()
		snap, err := p.Recent(context.Background(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Machine.Cores != 3 || snap.Machine.MemoryBytes != 8000000*1024 {
			t.Errorf("v2=%v: machine %+v, want 3 cores and 8000000 KiB", v2, snap.Machine)
		}
		if len(snap.Containers) != 2 {
			t.Fatalf("v2=%v: %d containers, want app and sidecar", v2, len(snap.Containers))
		}
		app, sc := snap.Containers[0], snap.Containers[1]
		if app.ID != "c-app" || app.Cgroup != podCg+"/c-app" || app.Pod.UID != "u1" || app.CFS != nil || app.MemoryCache != nil {
			t.Errorf("v2=%v: app = %+v; want its cgroup, no CFS (no CPU limit), no cache (no cgroup files)", v2, app)
		}
		if sc.Image != "registry/side:1" || sc.MemoryCache == nil || *sc.MemoryCache != 700 ||
			sc.CFS == nil || *sc.CFS != (CFSStats{9, 4, 2000}) {
			t.Errorf("v2=%v: sidecar = %+v (cache %v, cfs %v)", v2, sc, sc.MemoryCache, sc.CFS)
		}
		if len(app.Filesystems) == 0 || app.Filesystems[0].Usage < 4096 {
			t.Errorf("v2=%v: app filesystems %+v, want its writable layer and logs", v2, app.Filesystems)
		}
		if len(snap.Sandboxes) != 1 || snap.Sandboxes[0].ID != "s1" || len(snap.Sandboxes[0].Network) != 1 ||
			*snap.Sandboxes[0].Network[0].RxBytes != 12345 {
			t.Errorf("v2=%v: sandboxes %+v, want s1 with eth0", v2, snap.Sandboxes)
		}

		// A second scrape within maxAge reads nothing; past it, reads again.
		again, _ := p.Recent(context.Background(), time.Minute)
		f.clock.SetTime(testNow.Add(2 * time.Minute))
		later, _ := p.Recent(context.Background(), time.Minute)
		if again != snap || later == snap {
			t.Errorf("v2=%v: Recent shared %v, read anew %v; want true and true", v2, again == snap, later != snap)
		}
	}
}

// TestCPUAndMemoryReadsNoFilesystem checks /metrics/resource's path: CPU
// and memory as Get has them, and nothing of a filesystem.
func TestCPUAndMemoryReadsNoFilesystem(t *testing.T) {
	f := newFixture(t, true)
	p := f.provider()
	full, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.rt.SetImageFsInfo(nil)
	s, err := p.CPUAndMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.Fs != nil || s.Node.Runtime != nil || s.Node.Rlimit != nil {
		t.Errorf("node has filesystem or rlimit stats: %+v", s.Node)
	}
	if s.Node.Memory == nil || *s.Node.Memory.WorkingSetBytes != *full.Node.Memory.WorkingSetBytes || s.Node.CPU == nil {
		t.Errorf("node memory %+v cpu %+v", s.Node.Memory, s.Node.CPU)
	}
	if len(s.Pods) != 2 {
		t.Fatalf("%d pods, want 2", len(s.Pods))
	}
	web := s.Pods[0]
	if web.EphemeralStorage != nil || web.VolumeStats != nil || web.ProcessStats != nil {
		t.Errorf("web has storage stats: %+v", web)
	}
	if web.Memory == nil || web.CPU == nil || len(web.Containers) != 2 {
		t.Fatalf("web: memory %v cpu %v, %d containers", web.Memory, web.CPU, len(web.Containers))
	}
	for _, c := range web.Containers {
		if c.Rootfs != nil || c.Logs != nil || c.StartTime.IsZero() {
			t.Errorf("container %s: rootfs %v logs %v start %v", c.Name, c.Rootfs, c.Logs, c.StartTime)
		}
	}
	if *web.Containers[0].CPU.UsageCoreNanoSeconds != 42 {
		t.Errorf("app cpu %d, want 42", *web.Containers[0].CPU.UsageCoreNanoSeconds)
	}
}

func mkdevOf(major, minor uint32) uint64 { return unix.Mkdev(major, minor) }
