package stats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// Runtime is the part of the CRI the provider reads; *runtime.Service
// implements it.
type Runtime interface {
	ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// Options configure a Provider.
type Options struct {
	// Runtime is required.
	Runtime  Runtime
	NodeName string
	// RootDir is berth's root directory; its filesystem is the nodefs, as
	// the kubelet's root directory's is. Pod volumes live under it.
	RootDir string
	// PodLogsDir is the root of container logs, e.g. /var/log/pods.
	PodLogsDir string
	// Pods returns the active pods; nil means none.
	Pods func() []*v1.Pod
	// PodCgroup returns the cgroupfs path of the pod's cgroup, "" when the
	// pod has none; nil means no pod has one.
	PodCgroup func(pod *v1.Pod) string
	// PodsCgroup is the cgroupfs path of the cgroup that holds every pod
	// (kubepods), reported as the "pods" system container, whose available
	// memory the allocatable memory eviction signal reads; "" leaves it out.
	PodsCgroup string
	// MountedVolumes measures the pod's volumes that drivers mount (CSI,
	// through NodeGetVolumeStats); nil: none.
	MountedVolumes MountedVolumes
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Log defaults to discarding.
	Log *slog.Logger
	// ProcFS and CgroupFS are where procfs and the cgroup filesystem are
	// mounted; defaults /proc and /sys/fs/cgroup.
	ProcFS   string
	CgroupFS string
}

// MountedVolumes measures the volumes of a pod that a driver mounts
// (*csi.PodVolumes), each entry read at now.
type MountedVolumes interface {
	VolumeStats(ctx context.Context, pod *v1.Pod, now metav1.Time) []statsapi.VolumeStats
}

// Provider computes the kubelet's Summary for berth's node and pods. Each
// Get reads the node afresh; the one thing it keeps between calls is the
// last reading of each CPU counter (the node's, the pods cgroup's, each
// listed pod's), since a CPU rate needs two. It is safe for concurrent
// use; every Get, whoever calls it, starts a new rate interval.
type Provider struct {
	opts Options
	log  *slog.Logger
	cpu  cpuHistory
	// sysinfoProcs is sysinfo(2)'s task count, the fallback when loadavg
	// cannot be read.
	sysinfoProcs func() (int64, error)

	machine machineFacts
	mu      sync.Mutex
	last    *Snapshot // the newest reading, for Recent
}

// New returns a Provider.
func New(opts Options) *Provider {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ProcFS == "" {
		opts.ProcFS = "/proc"
	}
	if opts.CgroupFS == "" {
		opts.CgroupFS = "/sys/fs/cgroup"
	}
	if opts.Pods == nil {
		opts.Pods = func() []*v1.Pod { return nil }
	}
	if opts.PodCgroup == nil {
		opts.PodCgroup = func(*v1.Pod) string { return "" }
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, log: log, sysinfoProcs: sysinfoProcs}
}

// Get returns the node's and the active pods' statistics. Only the node's
// memory and filesystem are essential (eviction cannot work without them):
// if either cannot be read, Get fails and names the file. Anything else
// that cannot be read is logged and its field left nil. The reading is
// kept for Recent.
func (p *Provider) Get(ctx context.Context) (*statsapi.Summary, error) {
	s, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	return s.Summary, nil
}

func (p *Provider) read(ctx context.Context) (*Snapshot, error) {
	now := metav1.NewTime(p.opts.Clock.Now())
	cg, cgErr := detectCgroupFS(p.opts.CgroupFS)
	mem, err := p.nodeMemory(cg, cgErr)
	if err != nil {
		return nil, fmt.Errorf("node memory: %w", err)
	}
	nodefs, err := statFS(p.opts.RootDir)
	if err != nil {
		return nil, fmt.Errorf("node filesystem: %w", err)
	}
	sizes := newFsCache(p)
	sizes.put(p.opts.RootDir, nodefs)
	node := statsapi.NodeStats{
		NodeName: p.opts.NodeName,
		Memory:   mem.toStats(now),
		Fs:       nodefs.toStats(now),
		Rlimit:   p.rlimit(now),
		Runtime:  p.runtimeStats(ctx, now, sizes),
	}
	if boot, err := bootTime(p.opts.ProcFS); err != nil {
		p.warn("node start time unknown", err)
	} else {
		node.StartTime = metav1.NewTime(boot)
	}
	if usage, err := rootCPUUsage(cg, p.opts.ProcFS); err != nil {
		p.warn("node cpu unknown", err)
	} else {
		node.CPU = p.cpuStats(cpuCounter{scope: scopeNode}, usage, now)
	}
	if p.opts.PodsCgroup != "" && cgErr == nil {
		if pods := p.podsContainer(cg, now, node.StartTime); pods.Memory != nil || pods.CPU != nil {
			node.SystemContainers = []statsapi.ContainerStats{pods}
		}
	}
	var c *cgroupFS
	if cgErr == nil {
		c = &cg
	}
	pods := p.podStats(ctx, now, c, nodefs, sizes)
	snap := &Snapshot{
		Time:       now.Time,
		Summary:    &statsapi.Summary{Node: node, Pods: pods.pods},
		Containers: pods.containers,
		Sandboxes:  pods.sandboxes,
		Machine:    p.machine.get(p.opts.ProcFS),
	}
	if mem.Limit != nil {
		snap.Machine.MemoryBytes = *mem.Limit
	}
	p.keep(snap)
	return snap, nil
}

// podsContainer is the "pods" system container: the cgroup that holds
// every pod, whose memory the allocatable eviction signal reads.
func (p *Provider) podsContainer(cg cgroupFS, now, start metav1.Time) statsapi.ContainerStats {
	c := statsapi.ContainerStats{Name: statsapi.SystemContainerPods, StartTime: start}
	if m, err := cg.memory(p.opts.PodsCgroup); err != nil {
		p.warn("pods cgroup memory unknown", err, "cgroup", p.opts.PodsCgroup)
	} else {
		c.Memory = m.toStats(now)
	}
	if usage, err := cg.cpuUsage(p.opts.PodsCgroup); err != nil {
		p.warn("pods cgroup cpu unknown", err, "cgroup", p.opts.PodsCgroup)
	} else {
		c.CPU = p.cpuStats(cpuCounter{scope: scopePodsCgroup}, usage, now)
	}
	return c
}

// HasDedicatedImageFs reports whether the runtime keeps its images on a
// filesystem other than the nodefs, which decides which eviction signals
// apply to which filesystem.
func (p *Provider) HasDedicatedImageFs(ctx context.Context) (bool, error) {
	resp, err := p.opts.Runtime.ImageFsInfo(ctx)
	if err != nil {
		return false, err
	}
	mount := firstFs(resp.GetImageFilesystems()).GetFsId().GetMountpoint()
	if mount == "" {
		return false, errors.New("the runtime reports no image filesystem")
	}
	imageDev, err := deviceOf(mount)
	if err != nil {
		return false, fmt.Errorf("image filesystem: %w", err)
	}
	nodeDev, err := deviceOf(p.opts.RootDir)
	if err != nil {
		return false, fmt.Errorf("node filesystem: %w", err)
	}
	return imageDev != nodeDev, nil
}

// nodeMemory reads the root cgroup's memory against the machine's
// capacity (MemTotal), as cadvisor's root container gives it to the
// kubelet.
func (p *Provider) nodeMemory(cg cgroupFS, cgErr error) (memoryReading, error) {
	meminfo, err := readMeminfo(p.opts.ProcFS)
	if err != nil {
		return memoryReading{}, err
	}
	if cgErr != nil {
		return memoryReading{}, cgErr
	}
	var m memoryReading
	if cg.v2 {
		stat, err := readFlatKeyed(filepath.Join(cg.mount, "memory.stat"))
		if err != nil {
			return memoryReading{}, err
		}
		m = v2RootMemory(meminfo, stat)
	} else if m, err = cg.memory("/"); err != nil {
		return memoryReading{}, err
	}
	m.Limit = ptr(meminfo["MemTotal"])
	return m, nil
}

func (p *Provider) rlimit(now metav1.Time) *statsapi.RlimitStats {
	r := &statsapi.RlimitStats{Time: now}
	if m, err := maxPID(p.opts.ProcFS); err != nil {
		p.warn("node max PID unknown", err)
	} else {
		r.MaxPID = m
	}
	n, err := runningTasks(p.opts.ProcFS)
	if err != nil {
		p.log.Debug("reading the task count from sysinfo", "err", err)
		n, err = p.sysinfoProcs()
	}
	if err != nil {
		p.warn("node process count unknown", err)
	} else {
		r.NumOfRunningProcesses = &n
	}
	return r
}

// runtimeStats is the runtime's image filesystem (and container
// filesystem, the same one unless the runtime names another): its usage
// from the runtime, its size from statfs of the mount point it names.
func (p *Provider) runtimeStats(ctx context.Context, now metav1.Time, sizes *fsCache) *statsapi.RuntimeStats {
	resp, err := p.opts.Runtime.ImageFsInfo(ctx)
	if err != nil {
		p.warn("image filesystem stats unknown", err)
		return nil
	}
	img := firstFs(resp.GetImageFilesystems())
	if img == nil {
		p.warn("image filesystem stats unknown", errors.New("the runtime reports no image filesystem"))
		return nil
	}
	rs := &statsapi.RuntimeStats{ImageFs: runtimeFs(img, sizes.get(img.GetFsId().GetMountpoint()), now)}
	if c := firstFs(resp.GetContainerFilesystems()); c != nil {
		rs.ContainerFs = runtimeFs(c, sizes.get(c.GetFsId().GetMountpoint()), now)
	} else {
		cp := *rs.ImageFs
		rs.ContainerFs = &cp
	}
	return rs
}

// firstFs is the filesystem the kubelet reports when a runtime names
// several: the first.
func firstFs(fss []*runtimeapi.FilesystemUsage) *runtimeapi.FilesystemUsage {
	if len(fss) == 0 {
		return nil
	}
	return fss[0]
}

// runtimeFs is what the runtime uses on a filesystem of size f (nil when
// unknown).
func runtimeFs(u *runtimeapi.FilesystemUsage, f *fsInfo, now metav1.Time) *statsapi.FsStats {
	s := &statsapi.FsStats{Time: now}
	if f != nil {
		s = f.sizeOnly(now)
	}
	if u.GetTimestamp() != 0 {
		s.Time = nanoTime(u.GetTimestamp())
	}
	if v := u.GetUsedBytes(); v != nil {
		s.UsedBytes = ptr(v.GetValue())
	}
	if v := u.GetInodesUsed(); v != nil {
		s.InodesUsed = ptr(v.GetValue())
	}
	return s
}

// warn logs a field that could not be read. Something that is simply not
// there (a pod whose logs or volumes are not created yet) is routine and
// logged at debug level, so that a 10 s period does not flood the log.
func (p *Provider) warn(msg string, err error, args ...any) {
	args = append(args, "err", err)
	if errors.Is(err, fs.ErrNotExist) {
		p.log.Debug(msg, args...)
		return
	}
	p.log.Warn(msg, args...)
}

func sysinfoProcs() (int64, error) {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 0, fmt.Errorf("sysinfo: %w", err)
	}
	return int64(info.Procs), nil
}

// fsCache holds, for one Get, the size of each filesystem already
// measured, by the path it was measured at.
type fsCache struct {
	p     *Provider
	sizes map[string]*fsInfo
}

func newFsCache(p *Provider) *fsCache { return &fsCache{p: p, sizes: map[string]*fsInfo{}} }

func (c *fsCache) put(path string, f fsInfo) { c.sizes[path] = &f }

// get is the size of the filesystem at path, nil (and logged once) when
// statfs fails.
func (c *fsCache) get(path string) *fsInfo {
	if path == "" {
		return nil
	}
	if f, ok := c.sizes[path]; ok {
		return f
	}
	f, err := statFS(path)
	if err != nil {
		c.p.warn("filesystem size unknown", err)
		c.sizes[path] = nil
		return nil
	}
	c.sizes[path] = &f
	return &f
}

// SetMountedVolumes gives the Provider the CSI volumes of a cluster node,
// which are built after it; it is called once, before the first Get.
func (p *Provider) SetMountedVolumes(m MountedVolumes) { p.opts.MountedVolumes = m }
