package stats

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Snapshot is one reading of the node: its Summary, and what cAdvisor's
// container metrics show beyond the Summary's fields. The values are
// shared by every caller and must not be changed.
type Snapshot struct {
	// Time is when the reading began.
	Time    time.Time
	Summary *statsapi.Summary
	// Containers are the running containers of the active pods.
	Containers []ContainerSample
	// Sandboxes are the ready sandboxes of the active pods.
	Sandboxes []SandboxSample
	Machine   MachineInfo
}

// MachineInfo is cAdvisor's machine_* numbers.
type MachineInfo struct {
	// Cores is the number of logical CPUs; 0 when unknown.
	Cores int
	// MemoryBytes is MemTotal; 0 when unknown.
	MemoryBytes uint64
	// MachineID, SystemUUID and BootID label cAdvisor's machine series;
	// "" when unknown.
	MachineID, SystemUUID, BootID string
}

// ContainerSample is one running container as cAdvisor labels it, with
// its Summary stats and the numbers only the cgroup has.
type ContainerSample struct {
	Pod statsapi.PodReference
	// ID is the runtime's container ID: cAdvisor's name label under
	// containerd.
	ID string
	// Cgroup is the container's cgroupfs path, cAdvisor's id label; ""
	// when the pod has no cgroup of berth's.
	Cgroup string
	// Image is the image the pod's spec names for the container.
	Image string
	Stats statsapi.ContainerStats
	// MemoryCache is the page cache charged to the container (total_cache
	// on v1, file on v2); nil when unknown.
	MemoryCache *uint64
	// CFS is the container's CPU bandwidth accounting; nil when it has no
	// CPU limit (cAdvisor reports it only with a quota) or it is unknown.
	CFS *CFSStats
	// Filesystems are the container's writable layer and logs, one entry
	// per device they are on.
	Filesystems []FsSample
}

// CFSStats is cpu.stat's bandwidth accounting.
type CFSStats struct {
	Periods, ThrottledPeriods uint64
	ThrottledNanos            uint64
}

// FsSample is what a container uses on one filesystem.
type FsSample struct {
	// Device is the mount source of the filesystem (/dev/sda1), or its
	// mount point when that is unknown.
	Device string
	Usage  uint64
	// Limit is the filesystem's capacity; nil when unknown.
	Limit *uint64
}

// SandboxSample is a pod's sandbox, whose network namespace is the pod's:
// cAdvisor shows the pod's network on it.
type SandboxSample struct {
	Pod       statsapi.PodReference
	ID        string
	Cgroup    string
	StartTime time.Time
	// Network is each interface of the pod's namespace but lo; nil for a
	// pod on the host's network, whose interfaces are the node's.
	Network []statsapi.InterfaceStats
}

// Recent returns the latest reading if it began no more than maxAge ago,
// and otherwise reads the node now (see Get). Eviction's periodic Get and
// /stats/summary feed it, so that a scrape rarely reads anything itself.
func (p *Provider) Recent(ctx context.Context, maxAge time.Duration) (*Snapshot, error) {
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	if last != nil && p.opts.Clock.Since(last.Time) <= maxAge {
		return last, nil
	}
	return p.read(ctx)
}

// keep makes s the latest reading unless a newer one is already kept.
func (p *Provider) keep(s *Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil || !s.Time.Before(p.last.Time) {
		p.last = s
	}
}

// CPUAndMemory returns the node's and the active pods' CPU and memory, and
// their containers' start times: what /metrics/resource serves, read from
// the cgroups and the runtime's container stats only, without a
// filesystem's usage (no du of logs or volumes, no statfs, no image
// filesystem). It fails only when the node's memory cannot be read.
func (p *Provider) CPUAndMemory(ctx context.Context) (*statsapi.Summary, error) {
	now := metav1.NewTime(p.opts.Clock.Now())
	cg, cgErr := detectCgroupFS(p.opts.CgroupFS)
	mem, err := p.nodeMemory(cg, cgErr)
	if err != nil {
		return nil, fmt.Errorf("node memory: %w", err)
	}
	node := statsapi.NodeStats{NodeName: p.opts.NodeName, Memory: mem.toStats(now)}
	if usage, err := rootCPUUsage(cg, p.opts.ProcFS); err != nil {
		p.warn("node cpu unknown", err)
	} else {
		node.CPU = p.cpuStats(cpuCounter{scope: scopeNode}, usage, now)
	}
	var c *cgroupFS
	if cgErr == nil {
		c = &cg
	}
	pods := p.activePods()
	out := &statsapi.Summary{Node: node, Pods: make([]statsapi.PodStats, 0, len(pods))}
	if len(pods) == 0 {
		return out, nil
	}
	rv := p.readRuntime(ctx)
	for _, pod := range pods {
		out.Pods = append(out.Pods, p.cpuAndMemoryOfPod(now, pod, rv, c))
	}
	return out, nil
}

// containerSample labels a container as cAdvisor does and reads what its
// cgroup alone knows: page cache and CPU throttling.
func (p *Provider) containerSample(pod *v1.Pod, c *runtimeapi.Container, s *runtimeapi.ContainerStats, cs statsapi.ContainerStats,
	cg *cgroupFS, podCgroup string, devs *deviceNames) ContainerSample {
	out := ContainerSample{
		Pod:   statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		ID:    c.GetId(),
		Image: specImage(pod, cs.Name),
		Stats: cs,
	}
	if podCgroup != "" && safeName(c.GetId()) {
		out.Cgroup = podCgroup + "/" + c.GetId()
	}
	if out.Cgroup != "" && cg != nil {
		if v, err := cg.memoryCache(out.Cgroup); err != nil {
			p.warn("container page cache unknown", err, "pod", podKey(pod), "container", cs.Name)
		} else {
			out.MemoryCache = &v
		}
		if hasCPULimit(pod, cs.Name) {
			if v, err := cg.cfs(out.Cgroup); err != nil {
				p.warn("container cpu throttling unknown", err, "pod", podKey(pod), "container", cs.Name)
			} else {
				out.CFS = v
			}
		}
	}
	out.Filesystems = containerFilesystems(cs, s.GetWritableLayer().GetFsId().GetMountpoint(), p.opts.PodLogsDir, devs.name)
	return out
}

// containerFilesystems sums the writable layer (measured on rootfsPath)
// and the logs (on logsPath) by the device they are on, as cAdvisor gives
// one series per device.
func containerFilesystems(cs statsapi.ContainerStats, rootfsPath, logsPath string, device func(path string) string) []FsSample {
	var out []FsSample
	add := func(f *statsapi.FsStats, path string) {
		if f == nil || f.UsedBytes == nil {
			return
		}
		dev := device(path)
		for i := range out {
			if out[i].Device == dev {
				out[i].Usage += *f.UsedBytes
				return
			}
		}
		out = append(out, FsSample{Device: dev, Usage: *f.UsedBytes, Limit: f.CapacityBytes})
	}
	add(cs.Rootfs, rootfsPath)
	add(cs.Logs, logsPath)
	return out
}

// sandboxSample is the pod's sandbox, with the network of its namespace
// read from /proc/<pid>/net/dev of a process in the sandbox's cgroup, as
// cAdvisor reads a container's network.
func (p *Provider) sandboxSample(pod *v1.Pod, sb *runtimeapi.PodSandbox, cg *cgroupFS, podCgroup string) SandboxSample {
	out := SandboxSample{
		Pod:       statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		ID:        sb.GetId(),
		StartTime: time.Unix(0, sb.GetCreatedAt()),
	}
	if podCgroup == "" || !safeName(sb.GetId()) {
		return out
	}
	out.Cgroup = podCgroup + "/" + sb.GetId()
	// The kubelet's cAdvisor would show the node's interfaces for a pod on
	// the host's network; they are not the pod's, and berth leaves them out.
	if pod.Spec.HostNetwork || cg == nil {
		return out
	}
	pid, err := cg.firstProcess(out.Cgroup)
	if err != nil {
		p.warn("pod network unknown", err, "pod", podKey(pod))
		return out
	}
	file := filepath.Join(p.opts.ProcFS, strconv.Itoa(pid), "net", "dev")
	data, err := readFile(file)
	if err == nil {
		out.Network, err = parseNetDev(file, data, metav1.NewTime(p.opts.Clock.Now()))
	}
	if err != nil {
		p.warn("pod network unknown", err, "pod", podKey(pod))
	}
	return out
}

// parseNetDev reads /proc/<pid>/net/dev: two header lines, then
// "iface: rx_bytes rx_packets rx_errs rx_drop ... tx_bytes tx_packets
// tx_errs tx_drop ...". Like cAdvisor, it leaves out lo.
func parseNetDev(file string, data []byte, now metav1.Time) ([]statsapi.InterfaceStats, error) {
	var out []statsapi.InterfaceStats
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if line <= 2 {
			continue
		}
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%s line %d: no interface name", file, line)
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("%s line %d: %d counters, want 16", file, line, len(f))
		}
		var v [16]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", file, line, err)
			}
			v[i] = n
		}
		if name == "lo" {
			continue
		}
		out = append(out, statsapi.InterfaceStats{
			Name: name, RxBytes: ptr(v[0]), RxErrors: ptr(v[2]), TxBytes: ptr(v[8]), TxErrors: ptr(v[10]),
		})
	}
	return out, sc.Err()
}

func specImage(pod *v1.Pod, name string) string {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return cs[i].Image
			}
		}
	}
	return ""
}

func hasCPULimit(pod *v1.Pod, name string) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return !cs[i].Resources.Limits.Cpu().IsZero()
			}
		}
	}
	return false
}

// deviceNames names, for one reading, the device each path is on, from
// the mount table read once.
type deviceNames struct {
	p      *Provider
	mounts map[uint64]string // by device number
	byPath map[string]string
}

func newDeviceNames(p *Provider) *deviceNames {
	return &deviceNames{p: p, byPath: map[string]string{}}
}

// name is the mount source of the filesystem path is on, or path itself
// when the mount table does not say.
func (d *deviceNames) name(path string) string {
	if n, ok := d.byPath[path]; ok {
		return n
	}
	n := path
	if path == "" {
		return n
	}
	if d.mounts == nil {
		d.mounts = readMountSources(filepath.Join(d.p.opts.ProcFS, "self", "mountinfo"))
	}
	if dev, err := deviceOf(path); err == nil && d.mounts[dev] != "" {
		n = d.mounts[dev]
	}
	d.byPath[path] = n
	return n
}

// readMountSources maps each device number to its mount source; empty
// when mountinfo cannot be read.
func readMountSources(file string) map[uint64]string {
	data, err := readFile(file)
	if err != nil {
		return map[uint64]string{}
	}
	return parseMountSources(data)
}

// parseMountSources reads mountinfo lines: "id parent major:minor root
// mountpoint options [optional...] - fstype source superopts". The first
// mount of a device names it.
func parseMountSources(data []byte) map[uint64]string {
	out := map[uint64]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, v := range f {
			if v == "-" {
				sep = i
				break
			}
		}
		if len(f) < 3 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		major, minor, ok := strings.Cut(f[2], ":")
		ma, err1 := strconv.ParseUint(major, 10, 32)
		mi, err2 := strconv.ParseUint(minor, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		dev := unix.Mkdev(uint32(ma), uint32(mi))
		if _, seen := out[dev]; !seen {
			out[dev] = f[sep+2]
		}
	}
	return out
}
