package stats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/testing/fakecri"
)

// The CRI client berth runs with is a Runtime.
var _ Runtime = (*runtime.Service)(nil)

var _ Runtime = (*fakecri.Runtime)(nil)

// newFakeRuntime is a runtime holding sandboxes and containers, whose
// stats and image filesystem are stats and imageFs.
func newFakeRuntime(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container,
	stats []*runtimeapi.ContainerStats, imageFs *runtimeapi.ImageFsInfoResponse) *fakecri.Runtime {
	rt := fakecri.New(nil)
	for _, sb := range sandboxes {
		rt.AddSandbox(sb, "")
	}
	for _, c := range containers {
		rt.AddContainer(c, nil)
	}
	rt.SetContainerStats(stats)
	rt.SetImageFsInfo(imageFs)
	return rt
}

var (
	testNow      = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	sandboxStart = time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)
)

const kubepodsCg = "/kubepods"

// fixture is a node with one pod ("web", uid u1) that has two running
// containers, a disk emptyDir, a memory emptyDir (a real tmpfs), a hostPath
// volume and logs; and one pod ("idle", uid u2) that has nothing yet.
type fixture struct {
	proc, cgroups, root, logs, images string
	rt                                *fakecri.Runtime
	imageFs                           *runtimeapi.ImageFsInfoResponse
	v2                                bool
	clock                             *clocktesting.FakePassiveClock
	pods                              []*v1.Pod
	web, idle                         *v1.Pod
	log                               bytes.Buffer
}

func newFixture(t *testing.T, v2 bool) *fixture {
	t.Helper()
	f := &fixture{proc: fakeProc(t), root: t.TempDir(), logs: t.TempDir(), images: t.TempDir(),
		v2: v2, clock: clocktesting.NewFakePassiveClock(testNow)}
	if v2 {
		f.cgroups = fakeV2(t)
		writeFile(t, filepath.Join(f.cgroups, podCg, "c-side", "memory.current"), "2500\n")
		writeFile(t, filepath.Join(f.cgroups, podCg, "c-side", "memory.max"), "max\n")
		writeFile(t, filepath.Join(f.cgroups, podCg, "c-side", "memory.stat"), "inactive_file 500\nanon 1000\n")
		writeFile(t, filepath.Join(f.cgroups, kubepodsCg, "memory.current"), "500000\n")
		writeFile(t, filepath.Join(f.cgroups, kubepodsCg, "memory.max"), "4000000000\n")
		writeFile(t, filepath.Join(f.cgroups, kubepodsCg, "memory.stat"), "inactive_file 100000\n")
		writeFile(t, filepath.Join(f.cgroups, kubepodsCg, "cpu.stat"), "usage_usec 30000000\n")
	} else {
		f.cgroups = fakeV1(t)
		mem := filepath.Join(f.cgroups, "memory")
		writeFile(t, filepath.Join(mem, podCg, "c-side", "memory.usage_in_bytes"), "2500\n")
		writeFile(t, filepath.Join(mem, podCg, "c-side", "memory.limit_in_bytes"), "9223372036854771712\n")
		writeFile(t, filepath.Join(mem, podCg, "c-side", "memory.stat"), "total_inactive_file 500\ntotal_rss 1000\n")
		writeFile(t, filepath.Join(mem, kubepodsCg, "memory.usage_in_bytes"), "500000\n")
		writeFile(t, filepath.Join(mem, kubepodsCg, "memory.limit_in_bytes"), "4000000000\n")
		writeFile(t, filepath.Join(mem, kubepodsCg, "memory.stat"), "total_inactive_file 100000\n")
		writeFile(t, filepath.Join(f.cgroups, "cpu,cpuacct", kubepodsCg, "cpuacct.usage"), "30000000000\n")
	}

	f.web = &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{
				{Name: "app", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}},
				{Name: "sidecar"},
			},
			Volumes: []v1.Volume{
				{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc"}}},
			},
		},
	}
	f.idle = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: "default", UID: "u2"}}
	f.pods = []*v1.Pod{f.web, f.idle}

	writeSized(t, f.emptyDir("data", "blob"), 20000)
	mountTmpfs(t, filepath.Dir(f.emptyDir("cache", "x")))
	writeSized(t, f.emptyDir("cache", "x"), 10000)
	writeSized(t, filepath.Join(f.root, "pods", "u1", "etc-hosts"), 200)
	writeSized(t, filepath.Join(f.podLogs(), "app", "0.log"), 5000)
	writeSized(t, filepath.Join(f.podLogs(), "app", "1.log"), 3000)
	writeSized(t, filepath.Join(f.podLogs(), "sidecar", "0.log"), 100)
	writeSized(t, filepath.Join(f.podLogs(), "extra.log"), 1000)

	u1 := map[string]string{container.LabelPodUID: "u1"}
	running, exited := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	f.imageFs = &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp: testNow.UnixNano(),
		FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: f.images},
		UsedBytes: &runtimeapi.UInt64Value{Value: 1 << 20}, InodesUsed: &runtimeapi.UInt64Value{Value: 42},
	}}}
	f.rt = newFakeRuntime(
		[]*runtimeapi.PodSandbox{
			{Id: "s-old", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1"}, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: sandboxStart.Add(-time.Hour).UnixNano()},
			{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1"}, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: sandboxStart.UnixNano()},
		},
		[]*runtimeapi.Container{
			{Id: "c-app-old", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: u1, State: exited, CreatedAt: 100},
			{Id: "c-app", Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}, Labels: u1, State: running, CreatedAt: 200},
			{Id: "c-side", Metadata: &runtimeapi.ContainerMetadata{Name: "sidecar"}, Labels: u1, State: running, CreatedAt: 150},
			{Id: "c-stranger", Metadata: &runtimeapi.ContainerMetadata{Name: "x"}, Labels: map[string]string{container.LabelPodUID: "u9"}, State: running},
		},
		[]*runtimeapi.ContainerStats{
			{
				Attributes: &runtimeapi.ContainerAttributes{Id: "c-app"},
				Cpu:        &runtimeapi.CpuUsage{Timestamp: testNow.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 42}},
				Memory: &runtimeapi.MemoryUsage{
					Timestamp:       testNow.UnixNano(),
					WorkingSetBytes: &runtimeapi.UInt64Value{Value: 1000}, UsageBytes: &runtimeapi.UInt64Value{Value: 3000},
					RssBytes: &runtimeapi.UInt64Value{Value: 800}, AvailableBytes: &runtimeapi.UInt64Value{Value: 5000},
				},
				WritableLayer: &runtimeapi.FilesystemUsage{
					FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: f.images},
					UsedBytes: &runtimeapi.UInt64Value{Value: 4096}, InodesUsed: &runtimeapi.UInt64Value{Value: 3},
				},
			},
			{
				Attributes: &runtimeapi.ContainerAttributes{Id: "c-side"},
				WritableLayer: &runtimeapi.FilesystemUsage{
					FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: f.images},
					UsedBytes: &runtimeapi.UInt64Value{Value: 8192}, InodesUsed: &runtimeapi.UInt64Value{Value: 5},
				},
			},
		},
		f.imageFs,
	)
	return f
}

// setCPU sets the CPU used, in nanoseconds, by the node, the pods cgroup
// and the web pod's cgroup.
func (f *fixture) setCPU(t *testing.T, node, pods, web uint64) {
	t.Helper()
	for cg, ns := range map[string]uint64{"/": node, kubepodsCg: pods, podCg: web} {
		if f.v2 {
			writeFile(t, filepath.Join(f.cgroups, cg, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 0\n", ns/1000))
		} else {
			writeFile(t, filepath.Join(f.cgroups, "cpu,cpuacct", cg, "cpuacct.usage"), fmt.Sprintf("%d\n", ns))
		}
	}
}

func (f *fixture) emptyDir(vol, file string) string {
	return filepath.Join(f.root, "pods", "u1", "volumes", "kubernetes.io~empty-dir", vol, file)
}

func (f *fixture) podLogs() string { return filepath.Join(f.logs, "default_web_u1") }

func (f *fixture) provider() *Provider {
	return New(Options{
		Runtime:    f.rt,
		NodeName:   "node-1",
		RootDir:    f.root,
		PodLogsDir: f.logs,
		Pods:       func() []*v1.Pod { return f.pods },
		PodCgroup: func(pod *v1.Pod) string {
			if pod.UID == "u1" {
				return podCg
			}
			return ""
		},
		PodsCgroup: kubepodsCg,
		Clock:      f.clock,
		Log:        slog.New(slog.NewTextHandler(&f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ProcFS:     f.proc,
		CgroupFS:   f.cgroups,
	})
}

func statfsOf(t *testing.T, path string) fsInfo {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return fsInfoOf(&st)
}

func u64(v uint64) *uint64 { return &v }

// eq reports a mismatch of an optional number.
func eq(t *testing.T, what string, got, want *uint64) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil || *got != *want:
		t.Errorf("%s = %v, want %v", what, deref(got), deref(want))
	}
}

func TestGetNode(t *testing.T) {
	const memTotal = 8000000 * 1024
	for _, tc := range []struct {
		name                  string
		v2                    bool
		usage, workingSet     uint64
		podsAvailable, podsWS uint64
	}{
		// v1: the root cgroup's usage_in_bytes less total_inactive_file.
		{"cgroup v1", false, 6000000, 4000000, 4000000000 - 400000, 400000},
		// v2: MemTotal − MemFree less the root memory.stat's inactive_file.
		{"cgroup v2", true, (8000000 - 2000000) * 1024, (8000000-2000000)*1024 - 2000000, 4000000000 - 400000, 400000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.v2)
			s, err := f.provider().Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			n := s.Node
			if n.NodeName != "node-1" || !n.StartTime.Equal(ptrTime(time.Unix(1700000000, 0))) {
				t.Errorf("node name %q start %v", n.NodeName, n.StartTime)
			}
			if n.Memory == nil {
				t.Fatal("no node memory")
			}
			eq(t, "memory usage", n.Memory.UsageBytes, u64(tc.usage))
			eq(t, "memory working set", n.Memory.WorkingSetBytes, u64(tc.workingSet))
			eq(t, "memory available", n.Memory.AvailableBytes, u64(memTotal-tc.workingSet))
			if !n.Memory.Time.Time.Equal(testNow) {
				t.Errorf("memory time %v, want the clock's %v", n.Memory.Time, testNow)
			}

			nodefs := statfsOf(t, f.root)
			eq(t, "fs capacity", n.Fs.CapacityBytes, u64(nodefs.Capacity))
			eq(t, "fs inodes", n.Fs.Inodes, u64(nodefs.Inodes))
			if n.Fs.AvailableBytes == nil || n.Fs.UsedBytes == nil || n.Fs.InodesUsed == nil || n.Fs.InodesFree == nil {
				t.Errorf("node fs incomplete: %+v", n.Fs)
			}

			eq(t, "max PID", asU64(n.Rlimit.MaxPID), u64(63000))
			eq(t, "running processes", asU64(n.Rlimit.NumOfRunningProcesses), u64(345))

			img := n.Runtime.ImageFs
			eq(t, "imagefs used", img.UsedBytes, u64(1<<20))
			eq(t, "imagefs inodes used", img.InodesUsed, u64(42))
			eq(t, "imagefs capacity", img.CapacityBytes, u64(statfsOf(t, f.images).Capacity))
			if n.Runtime.ContainerFs == nil || *n.Runtime.ContainerFs.UsedBytes != 1<<20 {
				t.Errorf("containerFs %+v, want the image fs", n.Runtime.ContainerFs)
			}

			if len(n.SystemContainers) != 1 || n.SystemContainers[0].Name != statsapi.SystemContainerPods {
				t.Fatalf("system containers %+v, want pods", n.SystemContainers)
			}
			pods := n.SystemContainers[0].Memory
			eq(t, "pods working set", pods.WorkingSetBytes, u64(tc.podsWS))
			eq(t, "pods available", pods.AvailableBytes, u64(tc.podsAvailable))

			// CPU: the root cgroup's and kubepods' counters; no rate from
			// a first reading.
			if n.CPU == nil || !n.CPU.Time.Time.Equal(testNow) {
				t.Fatalf("node cpu %+v, want a reading at %v", n.CPU, testNow)
			}
			eq(t, "node cpu usage", n.CPU.UsageCoreNanoSeconds, u64(50*uint64(time.Second)))
			eq(t, "node cpu rate", n.CPU.UsageNanoCores, nil)
			podsCPU := n.SystemContainers[0].CPU
			if podsCPU == nil {
				t.Fatal("no pods cgroup cpu")
			}
			eq(t, "pods cgroup cpu usage", podsCPU.UsageCoreNanoSeconds, u64(30*uint64(time.Second)))
			eq(t, "pods cgroup cpu rate", podsCPU.UsageNanoCores, nil)
		})
	}
}

func TestGetPods(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		name := "cgroup v1"
		if v2 {
			name = "cgroup v2"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, v2)
			s, err := f.provider().Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Pods) != 2 {
				t.Fatalf("%d pods, want 2", len(s.Pods))
			}
			web, idle := s.Pods[0], s.Pods[1]
			if web.PodRef != (statsapi.PodReference{Name: "web", Namespace: "default", UID: "u1"}) {
				t.Errorf("podRef %+v", web.PodRef)
			}
			if !web.StartTime.Time.Equal(sandboxStart) {
				t.Errorf("start %v, want the ready sandbox's creation %v", web.StartTime, sandboxStart)
			}

			// Containers: the running ones, newest per name, sorted.
			if len(web.Containers) != 2 || web.Containers[0].Name != "app" || web.Containers[1].Name != "sidecar" {
				t.Fatalf("containers %+v, want app and sidecar", web.Containers)
			}
			app, side := web.Containers[0], web.Containers[1]
			if !app.StartTime.Time.Equal(time.Unix(0, 200)) {
				t.Errorf("app start %v, want the running container's creation", app.StartTime)
			}
			eq(t, "app working set", app.Memory.WorkingSetBytes, u64(1000))
			eq(t, "app available (limited)", app.Memory.AvailableBytes, u64(5000))
			eq(t, "app cpu", app.CPU.UsageCoreNanoSeconds, u64(42))
			eq(t, "sidecar working set (its cgroup)", side.Memory.WorkingSetBytes, u64(2000))
			eq(t, "sidecar available (unlimited)", side.Memory.AvailableBytes, nil)
			eq(t, "app rootfs", app.Rootfs.UsedBytes, u64(4096))
			eq(t, "app rootfs capacity", app.Rootfs.CapacityBytes, u64(statfsOf(t, f.images).Capacity))
			appLogs := onDisk(t, filepath.Join(f.podLogs(), "app"), filepath.Join(f.podLogs(), "app", "0.log"), filepath.Join(f.podLogs(), "app", "1.log"))
			sideLogs := onDisk(t, filepath.Join(f.podLogs(), "sidecar"), filepath.Join(f.podLogs(), "sidecar", "0.log"))
			eq(t, "app logs", app.Logs.UsedBytes, u64(appLogs.Bytes))
			eq(t, "app log inodes", app.Logs.InodesUsed, u64(appLogs.Inodes))
			eq(t, "sidecar logs", side.Logs.UsedBytes, u64(sideLogs.Bytes))

			// The pod's memory, cpu and processes come from its cgroup.
			eq(t, "pod working set", web.Memory.WorkingSetBytes, u64(200000))
			if web.CPU == nil {
				t.Fatal("no pod cpu")
			}
			eq(t, "pod cpu usage", web.CPU.UsageCoreNanoSeconds, u64(2*uint64(time.Second)))
			eq(t, "pod cpu rate (first reading)", web.CPU.UsageNanoCores, nil)
			if web.ProcessStats == nil {
				t.Fatal("no process stats")
			}
			eq(t, "pod processes", web.ProcessStats.ProcessCount, u64(fakePodProcesses))

			// Volumes: both emptyDirs, each measured on its own filesystem.
			vols := map[string]statsapi.VolumeStats{}
			for _, v := range web.VolumeStats {
				vols[v.Name] = v
			}
			if len(vols) != 2 {
				t.Fatalf("volume stats %+v, want data and cache (not host)", web.VolumeStats)
			}
			data := onDisk(t, filepath.Dir(f.emptyDir("data", "x")), f.emptyDir("data", "blob"))
			cache := onDisk(t, filepath.Dir(f.emptyDir("cache", "x")), f.emptyDir("cache", "x"))
			eq(t, "data used", vols["data"].UsedBytes, u64(data.Bytes))
			eq(t, "data inodes", vols["data"].InodesUsed, u64(data.Inodes))
			eq(t, "cache used", vols["cache"].UsedBytes, u64(cache.Bytes))
			eq(t, "cache capacity (its tmpfs)", vols["cache"].CapacityBytes, u64(4<<20))

			// Ephemeral storage: rootfs + logs + the disk emptyDir + pod-level
			// files; the memory emptyDir is the pod's memory, not its disk.
			extra := onDisk(t, filepath.Join(f.podLogs(), "extra.log"), filepath.Join(f.root, "pods", "u1", "etc-hosts"))
			wantBytes := 4096 + 8192 + appLogs.Bytes + sideLogs.Bytes + data.Bytes + extra.Bytes
			wantInodes := 3 + 5 + appLogs.Inodes + sideLogs.Inodes + data.Inodes + extra.Inodes
			eq(t, "ephemeral used", web.EphemeralStorage.UsedBytes, u64(wantBytes))
			eq(t, "ephemeral inodes", web.EphemeralStorage.InodesUsed, u64(wantInodes))
			eq(t, "ephemeral capacity (nodefs)", web.EphemeralStorage.CapacityBytes, u64(statfsOf(t, f.root).Capacity))

			// A pod with nothing yet is reported, with nothing measured.
			if idle.PodRef.UID != "u2" || len(idle.Containers) != 0 || idle.Memory != nil || idle.CPU != nil || idle.VolumeStats != nil || idle.ProcessStats != nil {
				t.Errorf("idle pod %+v", idle)
			}
			if idle.EphemeralStorage == nil || idle.EphemeralStorage.UsedBytes != nil {
				t.Errorf("idle pod ephemeral storage %+v, want the nodefs size and no usage", idle.EphemeralStorage)
			}
		})
	}
}

// TestGetCPURates follows the node's, the pods cgroup's and a pod's CPU
// counters across Gets, the fake clock standing for the time between.
func TestGetCPURates(t *testing.T) {
	sec := uint64(time.Second)
	type rates struct{ node, pods, web *uint64 }
	for _, v2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("cgroup v2 %v", v2), func(t *testing.T) {
			f := newFixture(t, v2)
			p := f.provider()
			get := func(step string, want rates) {
				t.Helper()
				s, err := p.Get(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !s.Node.CPU.Time.Time.Equal(f.clock.Now()) {
					t.Errorf("%s: node cpu time %v, want the clock's %v", step, s.Node.CPU.Time, f.clock.Now())
				}
				eq(t, step+": node rate", s.Node.CPU.UsageNanoCores, want.node)
				eq(t, step+": pods cgroup rate", s.Node.SystemContainers[0].CPU.UsageNanoCores, want.pods)
				for _, ps := range s.Pods {
					if ps.PodRef.UID == "u1" {
						eq(t, step+": web rate", ps.CPU.UsageNanoCores, want.web)
					}
				}
			}
			f.setCPU(t, 10*sec, 5*sec, 1*sec)
			get("first Get", rates{})

			// 10 s later: the node used 15 s (1.5 cores), the pods 4 s,
			// the web pod 2 s of it.
			f.clock.SetTime(testNow.Add(10 * time.Second))
			f.setCPU(t, 25*sec, 9*sec, 3*sec)
			get("10 s later", rates{u64(1500 * uint64(time.Millisecond)), u64(400 * uint64(time.Millisecond)), u64(200 * uint64(time.Millisecond))})

			// A Get at the same instant has no interval to measure.
			get("same instant", rates{})

			// The web pod's cgroup was made again: its counter restarts.
			f.clock.SetTime(testNow.Add(20 * time.Second))
			f.setCPU(t, 35*sec, 10*sec, sec/2)
			get("pod cgroup made again", rates{node: u64(sec), pods: u64(sec / 10)})
			f.clock.SetTime(testNow.Add(30 * time.Second))
			f.setCPU(t, 45*sec, 11*sec, sec)
			get("the interval after", rates{u64(sec), u64(sec / 10), u64(sec / 20)})

			// A pod no longer listed is forgotten: listed again, it starts over.
			f.pods = []*v1.Pod{f.idle}
			f.clock.SetTime(testNow.Add(40 * time.Second))
			get("web gone", rates{u64(0), u64(0), nil})
			f.pods = []*v1.Pod{f.web, f.idle}
			f.clock.SetTime(testNow.Add(50 * time.Second))
			get("web back", rates{u64(0), u64(0), nil})
		})
	}
}

// TestGetConcurrent is for the race detector: the eviction manager and
// the API call Get at once.
func TestGetConcurrent(t *testing.T) {
	f := newFixture(t, true)
	p := f.provider()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := p.Get(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

func TestGetPodWithoutCgroupSumsItsContainers(t *testing.T) {
	f := newFixture(t, false)
	p := f.provider()
	p.opts.PodCgroup = func(*v1.Pod) string { return "" }
	s, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	web := s.Pods[0]
	// Only app reports memory: without a pod cgroup, the sidecar's cgroup
	// cannot be found either.
	eq(t, "pod working set", web.Memory.WorkingSetBytes, u64(1000))
	eq(t, "pod usage", web.Memory.UsageBytes, u64(3000))
	// Only app reports cpu, and without a rate: the sum has none.
	if web.CPU == nil {
		t.Fatal("no pod cpu")
	}
	eq(t, "pod cpu usage", web.CPU.UsageCoreNanoSeconds, u64(42))
	eq(t, "pod cpu rate", web.CPU.UsageNanoCores, nil)
	if web.ProcessStats != nil {
		t.Errorf("process stats %+v without a pod cgroup", web.ProcessStats)
	}
}

func TestGetRuntimeDown(t *testing.T) {
	f := newFixture(t, false)
	f.rt.Fail("*", errors.New("connection refused"))
	s, err := f.provider().Get(context.Background())
	if err != nil {
		t.Fatalf("Get with the runtime down: %v, want a summary without runtime stats", err)
	}
	if s.Node.Runtime != nil || s.Node.Memory == nil || s.Node.Fs == nil {
		t.Errorf("node %+v", s.Node)
	}
	web := s.Pods[0]
	if len(web.Containers) != 0 || web.Memory == nil || len(web.VolumeStats) != 2 {
		t.Errorf("web %+v, want no containers but its cgroup and volumes", web)
	}
	if !strings.Contains(f.log.String(), "connection refused") {
		t.Errorf("the runtime's failure is not logged:\n%s", f.log.String())
	}
}

func TestGetFailsWithoutNodeMemoryOrFs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(f *fixture) string // returns the path the error must name
	}{
		{"no meminfo", func(f *fixture) string {
			p := filepath.Join(f.proc, "meminfo")
			os.Remove(p)
			return p
		}},
		{"no root memory cgroup", func(f *fixture) string {
			p := filepath.Join(f.cgroups, "memory", "memory.stat")
			os.Remove(p)
			return p
		}},
		{"no cgroup mount", func(f *fixture) string {
			f.cgroups = filepath.Join(f.cgroups, "gone")
			return f.cgroups
		}},
		{"no root dir", func(f *fixture) string {
			f.root = filepath.Join(f.root, "gone")
			return f.root
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			path := tc.break_(f)
			s, err := f.provider().Get(context.Background())
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("Get = %v, %v; want an error naming %s", s, err, path)
			}
		})
	}
}

func TestGetLeavesUnreadableFieldsNil(t *testing.T) {
	f := newFixture(t, false)
	os.Remove(filepath.Join(f.proc, "stat"))
	os.Remove(filepath.Join(f.proc, "sys", "kernel", "pid_max"))
	os.Remove(filepath.Join(f.proc, "sys", "kernel", "threads-max"))
	os.Remove(filepath.Join(f.cgroups, "cpu,cpuacct", "cpuacct.usage"))
	os.RemoveAll(filepath.Join(f.cgroups, "cpu,cpuacct", podCg))
	os.RemoveAll(filepath.Join(f.podLogs(), "sidecar"))
	f.rt.SetImageFsInfo(&runtimeapi.ImageFsInfoResponse{})
	s, err := f.provider().Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Without the root's cpuacct.usage, /proc/stat was the fallback, gone too.
	if !s.Node.StartTime.IsZero() || s.Node.Rlimit.MaxPID != nil || s.Node.Runtime != nil || s.Node.CPU != nil {
		t.Errorf("node %+v: start time, max PID, runtime and cpu should be unknown", s.Node)
	}
	web := s.Pods[0]
	// Without its cpu cgroup, the pod's cpu is its containers', and its
	// processes are unknown.
	if web.CPU == nil || *web.CPU.UsageCoreNanoSeconds != 42 {
		t.Errorf("pod cpu %+v, want app's 42 ns", web.CPU)
	}
	if web.ProcessStats != nil || web.Memory == nil {
		t.Errorf("pod processes %+v, memory %+v; want processes unknown, memory from its memory cgroup", web.ProcessStats, web.Memory)
	}
	if web.Containers[1].Logs != nil || web.Containers[0].Logs == nil {
		t.Errorf("logs: app %+v, sidecar %+v; want only the sidecar's unknown", web.Containers[0].Logs, web.Containers[1].Logs)
	}
}

func TestRlimitFallsBackToSysinfo(t *testing.T) {
	f := newFixture(t, false)
	os.Remove(filepath.Join(f.proc, "loadavg"))
	p := f.provider()
	p.sysinfoProcs = func() (int64, error) { return 12, nil }
	s, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "running processes", asU64(s.Node.Rlimit.NumOfRunningProcesses), u64(12))
}

func TestHasDedicatedImageFs(t *testing.T) {
	f := newFixture(t, false)
	p := f.provider()
	ctx := context.Background()
	if got, err := p.HasDedicatedImageFs(ctx); err != nil || got {
		t.Errorf("images in a dir on the nodefs: %v, %v; want false", got, err)
	}
	own := filepath.Join(f.images, "own")
	mountTmpfs(t, own)
	f.imageFs.ImageFilesystems[0].FsId.Mountpoint = own
	if got, err := p.HasDedicatedImageFs(ctx); err != nil || !got {
		t.Errorf("images on their own filesystem: %v, %v; want true", got, err)
	}
	f.rt.SetImageFsInfo(&runtimeapi.ImageFsInfoResponse{})
	if _, err := p.HasDedicatedImageFs(ctx); err == nil {
		t.Error("no image filesystem reported: no error")
	}
	f.rt.Fail("*", errors.New("down"))
	if _, err := p.HasDedicatedImageFs(ctx); err == nil {
		t.Error("runtime down: no error")
	}
}

func TestRunningByPod(t *testing.T) {
	running, exited := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	ctr := func(id, uid, name string, state runtimeapi.ContainerState, created int64) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Labels: map[string]string{container.LabelPodUID: uid}, State: state, CreatedAt: created}
	}
	got := runningByPod([]*runtimeapi.Container{
		ctr("a1", "u1", "a", running, 1),
		ctr("a2", "u1", "a", running, 2), // a restart whose predecessor is still listed as running
		ctr("a3", "u1", "a", exited, 3),
		ctr("b1", "u1", "b", running, 1),
		ctr("c1", "u2", "c", exited, 1),
		ctr("x", "", "x", running, 1),
	})
	ids := map[string][]string{}
	for uid, cs := range got {
		for _, c := range cs {
			ids[uid] = append(ids[uid], c.Id)
		}
	}
	if len(ids) != 1 || strings.Join(ids["u1"], ",") != "a2,b1" {
		t.Errorf("runningByPod = %v, want u1: a2,b1", ids)
	}
}

func TestEphemeralStorageSums(t *testing.T) {
	now := metav1.NewTime(testNow)
	nodefs := fsInfo{Capacity: 1000, Available: 400}
	fs := func(b, i uint64) *statsapi.FsStats { return &statsapi.FsStats{UsedBytes: u64(b), InodesUsed: u64(i)} }
	for _, tc := range []struct {
		name       string
		ctrs       []statsapi.ContainerStats
		vols       []statsapi.VolumeStats
		extra      []*statsapi.FsStats
		wantBytes  *uint64
		wantInodes *uint64
	}{
		{name: "nothing known"},
		{
			name:      "rootfs, logs, volumes and files",
			ctrs:      []statsapi.ContainerStats{{Rootfs: fs(10, 1), Logs: fs(20, 2)}, {Rootfs: fs(30, 3)}},
			vols:      []statsapi.VolumeStats{{FsStats: *fs(40, 4)}},
			extra:     []*statsapi.FsStats{fs(50, 5), nil},
			wantBytes: u64(150), wantInodes: u64(15),
		},
		{
			name:      "a part with bytes but no inodes",
			ctrs:      []statsapi.ContainerStats{{Rootfs: &statsapi.FsStats{UsedBytes: u64(7)}}},
			wantBytes: u64(7),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ephemeralStorage(nodefs, now, tc.ctrs, tc.vols, tc.extra)
			eq(t, "used", got.UsedBytes, tc.wantBytes)
			eq(t, "inodes used", got.InodesUsed, tc.wantInodes)
			eq(t, "capacity", got.CapacityBytes, u64(1000))
		})
	}
}

func TestDiskVolumes(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
	}}}
	got := diskVolumes(pod, []statsapi.VolumeStats{{Name: "disk"}, {Name: "mem"}, {Name: "unknown"}})
	if len(got) != 1 || got[0].Name != "disk" {
		t.Errorf("diskVolumes = %+v, want disk only", got)
	}
}

func asU64(p *int64) *uint64 {
	if p == nil {
		return nil
	}
	return u64(uint64(*p))
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// TestGetOnThisHost reads the real /proc and cgroup filesystem (v1 or v2,
// whichever the host has), only reading: the fakes above must agree with
// the kernel's file formats.
func TestGetOnThisHost(t *testing.T) {
	rt := newFakeRuntime(nil, nil, nil, &runtimeapi.ImageFsInfoResponse{})
	p := New(Options{Runtime: rt, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	s, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := s.Node.Memory
	if *m.WorkingSetBytes == 0 || *m.WorkingSetBytes > *m.UsageBytes || *m.AvailableBytes == 0 {
		t.Errorf("node memory: working set %d, usage %d, available %d", *m.WorkingSetBytes, *m.UsageBytes, *m.AvailableBytes)
	}
	r := s.Node.Rlimit
	if r.MaxPID == nil || *r.MaxPID <= 0 || r.NumOfRunningProcesses == nil || *r.NumOfRunningProcesses <= 0 {
		t.Errorf("rlimit %+v", r)
	}
	if s.Node.StartTime.IsZero() || s.Node.StartTime.After(time.Now()) {
		t.Errorf("node start time %v", s.Node.StartTime)
	}
	if n, err := sysinfoProcs(); err != nil || n <= 0 {
		t.Errorf("sysinfo tasks = %d, %v", n, err)
	}
	if c := s.Node.CPU; c == nil || c.UsageCoreNanoSeconds == nil || *c.UsageCoreNanoSeconds == 0 || c.UsageNanoCores != nil {
		t.Errorf("node cpu %+v, want usage and no rate yet", c)
	}
	// A second Get has an interval, however short, to measure a rate over.
	s, err = p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Node.CPU; c == nil || c.UsageNanoCores == nil {
		t.Errorf("node cpu on the second Get %+v, want a rate", c)
	}
}

// fakeMountedVolumes reports one CSI volume of the web pod.
type fakeMountedVolumes struct{}

func (fakeMountedVolumes) VolumeStats(_ context.Context, pod *v1.Pod, now metav1.Time) []statsapi.VolumeStats {
	if pod.Name != "web" {
		return nil
	}
	return []statsapi.VolumeStats{{Name: "claim", PVCRef: &statsapi.PVCReference{Name: "data", Namespace: pod.Namespace},
		FsStats: statsapi.FsStats{Time: now, CapacityBytes: u64(100), UsedBytes: u64(10)}}}
}

func TestGetMountedVolumes(t *testing.T) {
	f := newFixture(t, false)
	p := f.provider()
	p.opts.MountedVolumes = fakeMountedVolumes{}
	s, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	web := s.Pods[0]
	var claim *statsapi.VolumeStats
	for i, v := range web.VolumeStats {
		if v.Name == "claim" {
			claim = &web.VolumeStats[i]
		}
	}
	if len(web.VolumeStats) != 3 || claim == nil || claim.PVCRef.Name != "data" {
		t.Fatalf("volume stats %+v, want data, cache and the claim", web.VolumeStats)
	}
	// A volume on a driver's storage is no ephemeral storage of the pod.
	without := f.provider()
	s2, err := without.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "ephemeral storage", web.EphemeralStorage.UsedBytes, s2.Pods[0].EphemeralStorage.UsedBytes)
}
