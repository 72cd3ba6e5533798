// Package cm is berth's container manager: what the node has to give to pods
// (capacity and allocatable) and the configuration of the cgroups that hold
// them (kubepods, its QoS cgroups, one cgroup per pod), computed as the
// kubelet computes it. Writing cgroups is cm/cgroupfs's job.
package cm

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"
)

// MachineFiles are the kernel files MachineCapacity reads; an empty field
// means the host's own, so the zero value reads the host and tests point
// the fields at fixtures.
type MachineFiles struct {
	Meminfo    string // MemTotal is the memory capacity; /proc/meminfo.
	OnlineCPUs string // The online CPUs, a cpu list such as "0-3,8"; /sys/devices/system/cpu/online.
	PidMax     string // /proc/sys/kernel/pid_max ...
	ThreadsMax string // ... and /proc/sys/kernel/threads-max: the smaller is "pid".
	Hugepages  string // One hugepages-<N>kB directory per page size; /sys/kernel/mm/hugepages.
}

func (f MachineFiles) withHostDefaults() MachineFiles {
	or := func(path, host string) string {
		if path == "" {
			return host
		}
		return path
	}
	return MachineFiles{
		Meminfo:    or(f.Meminfo, "/proc/meminfo"),
		OnlineCPUs: or(f.OnlineCPUs, "/sys/devices/system/cpu/online"),
		PidMax:     or(f.PidMax, "/proc/sys/kernel/pid_max"),
		ThreadsMax: or(f.ThreadsMax, "/proc/sys/kernel/threads-max"),
		Hugepages:  or(f.Hugepages, "/sys/kernel/mm/hugepages"),
	}
}

// MachineCapacity reports the node's capacity as the kubelet does from
// cAdvisor's machine info: the online CPUs, MemTotal, maxPods pod slots,
// the size of the filesystem holding rootDir (berth's root directory, as
// the kubelet's root dir's) as ephemeral-storage, and the number of tasks
// the kernel allows (the smaller of pid_max and threads-max) as
// ResourcePID, which only the kubepods cgroup uses: leave it out of a
// Node's status. Every huge page size the kernel has is a hugepages-<size>
// resource holding its pre-allocated pages, in bytes (0 for none).
func MachineCapacity(files MachineFiles, rootDir string, maxPods int32) (v1.ResourceList, error) {
	files = files.withHostDefaults()
	cpus, err := onlineCPUs(files.OnlineCPUs)
	if err != nil {
		return nil, err
	}
	mem, err := memTotal(files.Meminfo)
	if err != nil {
		return nil, err
	}
	pids, err := taskMax(files.PidMax, files.ThreadsMax)
	if err != nil {
		return nil, err
	}
	storage, err := fsSize(rootDir)
	if err != nil {
		return nil, err
	}
	capacity, err := hugepagesCapacity(files.Hugepages)
	if err != nil {
		return nil, err
	}
	capacity[v1.ResourceCPU] = *resource.NewQuantity(int64(cpus), resource.DecimalSI)
	capacity[v1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(maxPods), resource.DecimalSI)
	capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(storage, resource.BinarySI)
	capacity[ResourcePID] = *resource.NewQuantity(pids, resource.DecimalSI)
	return capacity, nil
}

// onlineCPUs counts the CPUs in a cpu list file. Unlike runtime.NumCPU it
// does not shrink when berth itself runs in a cpuset.
func onlineCPUs(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read the online CPUs: %w", err)
	}
	set, err := cpuset.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if set.IsEmpty() {
		return 0, fmt.Errorf("%s: no online CPU", path)
	}
	return set.Size(), nil
}

// memTotal reads MemTotal, in bytes, from a meminfo file.
func memTotal(path string) (int64, error) {
	return meminfoField(path, "MemTotal:")
}

// meminfoField reads one "<name> <n> kB" line of a meminfo file, in bytes.
func meminfoField(path, name string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read memory capacity: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == name {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s %q: %w", path, strings.TrimSuffix(name, ":"), fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s: no %s line", path, strings.TrimSuffix(name, ":"))
}

// taskMax is the system-wide limit on tasks: every thread takes a PID and
// threads-max caps them independently, so the smaller one binds (the
// kubelet's pidlimit.Stats).
func taskMax(pidMaxPath, threadsMaxPath string) (int64, error) {
	least := int64(-1)
	for _, path := range []string{pidMaxPath, threadsMaxPath} {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("read the task limit: %w", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s: %q: want a positive integer", path, strings.TrimSpace(string(data)))
		}
		if least < 0 || n < least {
			least = n
		}
	}
	return least, nil
}

// fsSize is the size in bytes of the filesystem holding dir, as cAdvisor
// reports a filesystem's capacity (fragment size times blocks).
func fsSize(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("ephemeral-storage capacity: statfs %s: %w", dir, err)
	}
	return int64(st.Blocks) * int64(st.Frsize), nil
}
