package stats

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/kuberuntime"
)

// The layout of a pod's directory under the root dir, which package volume
// creates (see its doc.go).
const (
	podsDirName       = "pods"
	emptyDirPluginDir = "kubernetes.io~empty-dir"
	etcHostsFileName  = "etc-hosts"
)

// runtimeView is what the runtime says about the pods, read once per Get.
type runtimeView struct {
	// containers are each pod's running containers, one per name.
	containers map[string][]*runtimeapi.Container
	stats      map[string]*runtimeapi.ContainerStats
	// sandboxes are each pod's newest ready sandbox; its creation is the
	// pod's start time.
	sandboxes map[string]*runtimeapi.PodSandbox
}

// podsReading is what one Get measured of the pods: their Summary stats,
// and for /metrics/cadvisor what the Summary has no field for.
type podsReading struct {
	pods       []statsapi.PodStats
	containers []ContainerSample
	sandboxes  []SandboxSample
}

func (p *Provider) podStats(ctx context.Context, now metav1.Time, cg *cgroupFS, nodefs fsInfo, sizes *fsCache) podsReading {
	pods := p.activePods()
	out := podsReading{pods: make([]statsapi.PodStats, 0, len(pods))}
	if len(pods) == 0 {
		return out
	}
	rv := p.readRuntime(ctx)
	devs := newDeviceNames(p)
	for _, pod := range pods {
		ps := p.cpuAndMemoryOfPod(now, pod, rv, cg)
		ctrs := rv.containers[string(pod.UID)]
		cgPath := p.opts.PodCgroup(pod)
		for i := range ps.Containers {
			p.containerFs(ctx, now, &ps.Containers[i], pod, rv.stats[ctrs[i].GetId()], sizes)
			out.containers = append(out.containers, p.containerSample(pod, ctrs[i], rv.stats[ctrs[i].GetId()], ps.Containers[i], cg, cgPath, devs))
		}
		if sb := rv.sandboxes[string(pod.UID)]; sb != nil {
			out.sandboxes = append(out.sandboxes, p.sandboxSample(pod, sb, cg, cgPath))
		}
		p.podStorage(ctx, now, pod, &ps, cg, nodefs)
		out.pods = append(out.pods, ps)
	}
	return out
}

// activePods are the pods to measure; the CPU rates of any other pod are
// forgotten.
func (p *Provider) activePods() []*v1.Pod {
	pods := p.opts.Pods()
	listed := make(map[string]bool, len(pods))
	for _, pod := range pods {
		listed[string(pod.UID)] = true
	}
	p.cpu.retainPods(listed)
	return pods
}

// readRuntime lists the running containers, their stats and the ready
// sandboxes. A failed call leaves its part empty: pods are then reported
// without container stats rather than not at all.
func (p *Provider) readRuntime(ctx context.Context) runtimeView {
	rv := runtimeView{stats: map[string]*runtimeapi.ContainerStats{}, sandboxes: map[string]*runtimeapi.PodSandbox{}}
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	if ctrs, err := p.opts.Runtime.ListContainers(ctx, running); err != nil {
		p.warn("container stats unknown", err)
	} else {
		rv.containers = runningByPod(ctrs)
	}
	if stats, err := p.opts.Runtime.ListContainerStats(ctx, nil); err != nil {
		p.warn("container stats unknown", err)
	} else {
		for _, s := range stats {
			rv.stats[s.GetAttributes().GetId()] = s
		}
	}
	ready := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	if sbs, err := p.opts.Runtime.ListPodSandboxes(ctx, ready); err != nil {
		p.warn("pod start times unknown", err)
	} else {
		rv.sandboxes = newestSandboxes(sbs)
	}
	return rv
}

// runningByPod groups running containers by pod UID, keeping the newest of
// each name. The kubelet leaves terminated containers out of the stats:
// their usage is not the pod's any more.
func runningByPod(ctrs []*runtimeapi.Container) map[string][]*runtimeapi.Container {
	type key struct{ uid, name string }
	newest := map[key]*runtimeapi.Container{}
	for _, c := range ctrs {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		k := key{c.GetLabels()[container.LabelPodUID], c.GetMetadata().GetName()}
		if k.uid == "" || k.name == "" {
			continue
		}
		if cur, ok := newest[k]; !ok || c.GetCreatedAt() > cur.GetCreatedAt() {
			newest[k] = c
		}
	}
	out := map[string][]*runtimeapi.Container{}
	for k, c := range newest {
		out[k.uid] = append(out[k.uid], c)
	}
	for _, cs := range out {
		sort.Slice(cs, func(i, j int) bool { return cs[i].GetMetadata().GetName() < cs[j].GetMetadata().GetName() })
	}
	return out
}

// newestSandboxes is each pod's newest ready sandbox, whose creation is
// the pod's start time in the kubelet's CRI stats.
func newestSandboxes(sbs []*runtimeapi.PodSandbox) map[string]*runtimeapi.PodSandbox {
	out := map[string]*runtimeapi.PodSandbox{}
	for _, sb := range sbs {
		if sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		uid := sb.GetMetadata().GetUid()
		if cur, ok := out[uid]; uid != "" && (!ok || sb.GetCreatedAt() > cur.GetCreatedAt()) {
			out[uid] = sb
		}
	}
	return out
}

// cpuAndMemoryOfPod is the pod's start time, CPU and memory and its
// running containers' (in rv.containers' order): what /metrics/resource
// needs, read without touching a filesystem's usage.
func (p *Provider) cpuAndMemoryOfPod(now metav1.Time, pod *v1.Pod, rv runtimeView, cg *cgroupFS) statsapi.PodStats {
	uid := string(pod.UID)
	ps := statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: uid},
		Containers: []statsapi.ContainerStats{},
	}
	if sb, ok := rv.sandboxes[uid]; ok {
		ps.StartTime = nanoTime(sb.GetCreatedAt())
	} else if pod.Status.StartTime != nil {
		ps.StartTime = *pod.Status.StartTime
	}
	cgPath := p.opts.PodCgroup(pod)
	for _, c := range rv.containers[uid] {
		ps.Containers = append(ps.Containers, p.containerStats(now, pod, c, rv.stats[c.GetId()], cg, cgPath))
	}
	if cgPath != "" && cg != nil {
		if m, err := cg.memory(cgPath); err != nil {
			p.warn("pod memory unknown", err, "pod", podKey(pod))
		} else {
			ps.Memory = m.toStats(now)
		}
		if usage, err := cg.cpuUsage(cgPath); err != nil {
			p.warn("pod cpu unknown", err, "pod", podKey(pod))
		} else {
			ps.CPU = p.cpuStats(podCounter(uid), usage, now)
		}
	}
	if ps.CPU == nil {
		ps.CPU = sumCPU(ps.Containers, now)
	}
	if ps.Memory == nil {
		ps.Memory = sumMemory(ps.Containers, now)
	}
	return ps
}

// podStorage adds what the pod holds on disk, and its process count, to
// ps: volumes, logs, ephemeral storage.
func (p *Provider) podStorage(ctx context.Context, now metav1.Time, pod *v1.Pod, ps *statsapi.PodStats, cg *cgroupFS, nodefs fsInfo) {
	uid := string(pod.UID)
	if cgPath := p.opts.PodCgroup(pod); cgPath != "" && cg != nil {
		if n, err := cg.processCount(cgPath); err != nil {
			p.warn("pod process count unknown", err, "pod", podKey(pod))
		} else {
			ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: ptr(n)}
		}
	}
	if !safeName(uid) {
		p.log.Warn("pod UID cannot be a directory name; its volumes are not measured", "pod", podKey(pod), "uid", uid)
		return
	}
	ps.VolumeStats = p.volumeStats(ctx, now, pod)
	var extra []*statsapi.FsStats
	logDir := kuberuntime.PodLogsDirectory(p.opts.PodLogsDir, pod)
	if u, err := filesUsage(ctx, logDir); err != nil {
		p.warn("pod log usage unknown", err, "pod", podKey(pod))
	} else {
		extra = append(extra, usageOn(nil, u, now))
	}
	if u, err := fileUsage(filepath.Join(p.opts.RootDir, podsDirName, uid, etcHostsFileName)); err != nil {
		p.warn("pod hosts file usage unknown", err, "pod", podKey(pod))
	} else {
		extra = append(extra, usageOn(nil, u, now))
	}
	ps.EphemeralStorage = ephemeralStorage(nodefs, now, ps.Containers, diskVolumes(pod, ps.VolumeStats), extra)
}

func (p *Provider) containerStats(now metav1.Time, pod *v1.Pod, c *runtimeapi.Container, s *runtimeapi.ContainerStats,
	cg *cgroupFS, podCgroup string) statsapi.ContainerStats {
	name := c.GetMetadata().GetName()
	out := statsapi.ContainerStats{
		Name:      name,
		StartTime: nanoTime(c.GetCreatedAt()),
		CPU:       cpuFromCRI(s.GetCpu(), now),
		Memory:    memoryFromCRI(s.GetMemory(), hasMemoryLimit(pod, name), now),
	}
	// runc puts a container's cgroup under its pod's, named by its ID: the
	// fallback for a runtime that reports no memory.
	if out.Memory == nil && podCgroup != "" && cg != nil && safeName(c.GetId()) {
		if m, err := cg.memory(podCgroup + "/" + c.GetId()); err != nil {
			p.warn("container memory unknown", err, "pod", podKey(pod), "container", name)
		} else {
			out.Memory = m.toStats(now)
		}
	}
	return out
}

// containerFs adds the container's writable layer and logs to out.
func (p *Provider) containerFs(ctx context.Context, now metav1.Time, out *statsapi.ContainerStats, pod *v1.Pod, s *runtimeapi.ContainerStats, sizes *fsCache) {
	if wl := s.GetWritableLayer(); wl != nil {
		out.Rootfs = runtimeFs(wl, sizes.get(wl.GetFsId().GetMountpoint()), now)
	}
	name := out.Name
	if !safeName(name) {
		return
	}
	dir := filepath.Join(kuberuntime.PodLogsDirectory(p.opts.PodLogsDir, pod), name)
	u, err := walkDir(ctx, dir)
	if err != nil {
		p.warn("container log usage unknown", err, "pod", podKey(pod), "container", name)
		return
	}
	if u.Skipped > 0 {
		p.log.Debug("container logs partly unreadable", "pod", podKey(pod), "container", name, "skipped", u.Skipped)
	}
	out.Logs = usageOn(sizes.get(p.opts.PodLogsDir), u, now)
}

// volumeStats measures the pod's emptyDir volumes, on disk or in memory,
// as the kubelet's du-based volume metrics do, and asks the drivers of its
// CSI volumes for theirs; hostPath volumes are the node's, not the pod's,
// and are not measured.
func (p *Provider) volumeStats(ctx context.Context, now metav1.Time, pod *v1.Pod) []statsapi.VolumeStats {
	var out []statsapi.VolumeStats
	for _, vol := range pod.Spec.Volumes {
		if vol.EmptyDir == nil || !safeName(vol.Name) {
			continue
		}
		dir := filepath.Join(p.opts.RootDir, podsDirName, string(pod.UID), "volumes", emptyDirPluginDir, vol.Name)
		u, err := walkDir(ctx, dir)
		if err != nil {
			p.warn("volume usage unknown", err, "pod", podKey(pod), "volume", vol.Name)
			continue
		}
		if u.Skipped > 0 {
			p.log.Debug("volume partly unreadable", "pod", podKey(pod), "volume", vol.Name, "skipped", u.Skipped)
		}
		var size *fsInfo
		if f, err := statFS(dir); err != nil {
			p.warn("volume size unknown", err, "pod", podKey(pod), "volume", vol.Name)
		} else {
			size = &f
		}
		out = append(out, statsapi.VolumeStats{Name: vol.Name, FsStats: *usageOn(size, u, now)})
	}
	if p.opts.MountedVolumes != nil {
		out = append(out, p.opts.MountedVolumes.VolumeStats(ctx, pod, now)...)
	}
	return out
}

// diskVolumes are the volumes that count towards the pod's ephemeral
// storage: emptyDirs on the node's disk. A medium Memory emptyDir is a
// tmpfs whose pages are charged to the pod's memory cgroup; counting it
// as disk as well would count it twice.
func diskVolumes(pod *v1.Pod, vols []statsapi.VolumeStats) []statsapi.VolumeStats {
	onDisk := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory {
			onDisk[v.Name] = true
		}
	}
	var out []statsapi.VolumeStats
	for _, v := range vols {
		if onDisk[v.Name] {
			out = append(out, v)
		}
	}
	return out
}

// ephemeralStorage is the pod's use of the nodefs, as the kubelet sums it:
// its containers' writable layers and logs, its disk-backed local volumes
// and the extra files it has there (pod-level logs, /etc/hosts), framed by
// the nodefs's size. A sum stays nil while none of its parts is known.
func ephemeralStorage(nodefs fsInfo, now metav1.Time, ctrs []statsapi.ContainerStats, vols []statsapi.VolumeStats, extra []*statsapi.FsStats) *statsapi.FsStats {
	s := nodefs.sizeOnly(now)
	add := func(f *statsapi.FsStats) {
		if f == nil {
			return
		}
		s.UsedBytes = addUsage(s.UsedBytes, f.UsedBytes)
		s.InodesUsed = addUsage(s.InodesUsed, f.InodesUsed)
	}
	for i := range ctrs {
		add(ctrs[i].Rootfs)
		add(ctrs[i].Logs)
	}
	for i := range vols {
		add(&vols[i].FsStats)
	}
	for _, f := range extra {
		add(f)
	}
	return s
}

func addUsage(sum, v *uint64) *uint64 {
	switch {
	case v == nil:
		return sum
	case sum == nil:
		return ptr(*v)
	}
	return ptr(*sum + *v)
}

// sumMemory is the pod's memory when it has no cgroup of its own: the sum
// of its containers', nil if none reports any.
func sumMemory(ctrs []statsapi.ContainerStats, now metav1.Time) *statsapi.MemoryStats {
	var s *statsapi.MemoryStats
	for _, c := range ctrs {
		m := c.Memory
		if m == nil {
			continue
		}
		if s == nil {
			s = &statsapi.MemoryStats{Time: now}
		}
		s.WorkingSetBytes = addUsage(s.WorkingSetBytes, m.WorkingSetBytes)
		s.UsageBytes = addUsage(s.UsageBytes, m.UsageBytes)
		s.RSSBytes = addUsage(s.RSSBytes, m.RSSBytes)
		s.PageFaults = addUsage(s.PageFaults, m.PageFaults)
		s.MajorPageFaults = addUsage(s.MajorPageFaults, m.MajorPageFaults)
	}
	return s
}

// memoryFromCRI is the runtime's memory report in the Summary's terms.
// AvailableBytes is kept only for a container with a memory limit: without
// one, containerd reports 0, which would read as "out of memory".
func memoryFromCRI(m *runtimeapi.MemoryUsage, limited bool, now metav1.Time) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	s := &statsapi.MemoryStats{
		Time:            now,
		WorkingSetBytes: uint64Value(m.GetWorkingSetBytes()),
		UsageBytes:      uint64Value(m.GetUsageBytes()),
		RSSBytes:        uint64Value(m.GetRssBytes()),
		PageFaults:      uint64Value(m.GetPageFaults()),
		MajorPageFaults: uint64Value(m.GetMajorPageFaults()),
	}
	if m.GetTimestamp() != 0 {
		s.Time = nanoTime(m.GetTimestamp())
	}
	if limited {
		s.AvailableBytes = uint64Value(m.GetAvailableBytes())
	}
	return s
}

func hasMemoryLimit(pod *v1.Pod, name string) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return !cs[i].Resources.Limits.Memory().IsZero()
			}
		}
	}
	return false
}

func uint64Value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr(v.GetValue())
}

func nanoTime(ns int64) metav1.Time { return metav1.NewTime(time.Unix(0, ns)) }

// safeName reports whether s can be one path element: UIDs and names
// become directory names, and must not lead out of the pod's directory.
func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
