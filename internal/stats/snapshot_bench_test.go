package stats

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
)

// benchNode is a cgroup v2 node of 50 pods of 2 running containers each,
// every container with its cgroup files and a log file, every pod with
// its sandbox and network.
func benchNode(b *testing.B) *Provider {
	b.Helper()
	proc, cgroups, root, logs, images := b.TempDir(), b.TempDir(), b.TempDir(), b.TempDir(), b.TempDir()
	writeFile(b, filepath.Join(proc, "meminfo"), "MemTotal:        8000000 kB\nMemFree:         2000000 kB\n")
	writeFile(b, filepath.Join(proc, "stat"), "cpu  100 20 300 4000 50 6 7 8 9 10\nbtime 1700000000\n")
	writeFile(b, filepath.Join(proc, "loadavg"), "0.50 0.40 0.30 2/345 6789\n")
	writeFile(b, filepath.Join(cgroups, "cgroup.controllers"), "cpu memory pids\n")
	writeFile(b, filepath.Join(cgroups, "memory.stat"), "anon 1\ninactive_file 1\n")
	writeFile(b, filepath.Join(cgroups, "cpu.stat"), "usage_usec 5\n")
	writeFile(b, filepath.Join(proc, "cpuinfo"), "processor\t: 0\nprocessor\t: 1\n")
	var pods []*v1.Pod
	var sandboxes []*runtimeapi.PodSandbox
	var ctrs []*runtimeapi.Container
	var stats []*runtimeapi.ContainerStats
	limit := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
	for i := range 50 {
		uid := fmt.Sprintf("u%02d", i)
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + uid, Namespace: "default", UID: types.UID(uid)},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Limits: limit}}, {Name: "b"}}}}
		pods = append(pods, pod)
		cg := "/kubepods/pod" + uid
		writeFile(b, filepath.Join(cgroups, cg, "memory.current"), "300000\n")
		writeFile(b, filepath.Join(cgroups, cg, "memory.max"), "max\n")
		writeFile(b, filepath.Join(cgroups, cg, "memory.stat"), "anon 1\ninactive_file 1\nfile 2\n")
		writeFile(b, filepath.Join(cgroups, cg, "cpu.stat"), "usage_usec 5\n")
		writeFile(b, filepath.Join(cgroups, cg, "s"+uid, "cgroup.procs"), "1\n")
		sandboxes = append(sandboxes, &runtimeapi.PodSandbox{Id: "s" + uid, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid},
			State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1})
		for _, name := range []string{"a", "b"} {
			id := "c" + uid + name
			writeFile(b, filepath.Join(cgroups, cg, id, "memory.stat"), "anon 1\ninactive_file 1\nfile 2\n")
			writeFile(b, filepath.Join(cgroups, cg, id, "cpu.stat"), "usage_usec 5\nnr_periods 1\nnr_throttled 0\nthrottled_usec 0\n")
			writeSized(b, filepath.Join(logs, "default_p"+uid+"_"+uid, name, "0.log"), 4096)
			ctrs = append(ctrs, &runtimeapi.Container{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name},
				Labels: map[string]string{container.LabelPodUID: uid}, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 2})
			stats = append(stats, &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: id},
				Cpu:    &runtimeapi.CpuUsage{UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 9}},
				Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{Value: 9}},
				WritableLayer: &runtimeapi.FilesystemUsage{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: images},
					UsedBytes: &runtimeapi.UInt64Value{Value: 9}}})
		}
	}
	writeFile(b, filepath.Join(proc, "1", "net", "dev"), netDev)
	imageFs := &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: images}, UsedBytes: &runtimeapi.UInt64Value{Value: 1}}}}
	p := New(Options{
		Runtime: newFakeRuntime(sandboxes, ctrs, stats, imageFs), NodeName: "n", RootDir: root, PodLogsDir: logs,
		Pods:      func() []*v1.Pod { return pods },
		PodCgroup: func(pod *v1.Pod) string { return "/kubepods/pod" + string(pod.UID) },
		Clock:     clocktesting.NewFakePassiveClock(testNow), Log: slog.New(slog.DiscardHandler), ProcFS: proc, CgroupFS: cgroups,
	})
	return p
}

// BenchmarkReadings compares, for 100 containers, a full reading (what
// eviction and /stats/summary make, and what /metrics/cadvisor then
// shares), a scrape of /metrics/cadvisor between two readings (Recent
// serving the kept one), and /metrics/resource's CPU-and-memory path.
func BenchmarkReadings(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		read func(p *Provider) error
	}{
		{"Get", func(p *Provider) error { _, err := p.Get(ctx); return err }},
		{"RecentKept", func(p *Provider) error {
			_, err := p.Recent(ctx, time.Minute)
			return err
		}},
		{"CPUAndMemory", func(p *Provider) error { _, err := p.CPUAndMemory(ctx); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := benchNode(b)
			if _, err := p.Get(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.read(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
