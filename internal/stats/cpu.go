package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, which the kernel
// fixes at 100 per second on every architecture Go runs on, whatever its
// internal tick rate.
const userHZ = 100

// cpuUsage is the CPU time used by the cgroup and its descendants, in
// core-nanoseconds: cpu.stat's usage_usec on v2 (present whether or not
// the cpu controller is enabled), cpuacct.usage on v1.
func (c cgroupFS) cpuUsage(p string) (uint64, error) {
	if c.v2 {
		dir, err := c.dir("cpu", p)
		if err != nil {
			return 0, err
		}
		file := filepath.Join(dir, "cpu.stat")
		stat, err := readFlatKeyed(file)
		if err != nil {
			return 0, err
		}
		usec, ok := stat["usage_usec"]
		if !ok {
			return 0, fmt.Errorf("read %s: no usage_usec", file)
		}
		return usec * uint64(time.Microsecond), nil
	}
	dir, err := c.dir("cpuacct", p)
	if err != nil {
		return 0, err
	}
	return readUint(filepath.Join(dir, "cpuacct.usage"))
}

// rootCPUUsage is the node's CPU time, which cadvisor reads from the root
// cgroup. Where the root has no counter (older v2 kernels have no cpu.stat
// there; a v1 host may mount no cpuacct hierarchy), /proc/stat's cpu line
// measures the same thing, in coarser units.
func rootCPUUsage(cg cgroupFS, procFS string) (uint64, error) {
	if cg.v2 || cg.hierarchies["cpuacct"] != "" {
		usage, err := cg.cpuUsage("/")
		if !errors.Is(err, fs.ErrNotExist) {
			return usage, err
		}
	}
	file := filepath.Join(procFS, "stat")
	data, err := readFile(file)
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(file, data)
}

// parseProcStatCPU is the time all CPUs spent busy, from the first line
// of /proc/stat ("cpu user nice system idle iowait irq softirq steal guest
// guest_nice", in USER_HZ ticks): everything but idle and iowait. Guest
// time is left out because the kernel counts it in user and nice already.
func parseProcStatCPU(file string, data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) == 0 || string(fields[0]) != "cpu" {
			continue
		}
		if len(fields) < 9 {
			return 0, fmt.Errorf("read %s: cpu line has %d times, want at least 8 (up to steal)", file, len(fields)-1)
		}
		var ticks uint64
		// user, nice, system; then irq, softirq, steal.
		for _, i := range []int{1, 2, 3, 6, 7, 8} {
			v, err := strconv.ParseUint(string(fields[i]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read %s: cpu line: %w", file, err)
			}
			ticks += v
		}
		return ticks * uint64(time.Second/userHZ), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	return 0, fmt.Errorf("read %s: no cpu line", file)
}

// cpuStats reports a reading of counter c, taken at now, with its rate
// since the previous reading.
func (p *Provider) cpuStats(c cpuCounter, usage uint64, now metav1.Time) *statsapi.CPUStats {
	return &statsapi.CPUStats{
		Time:                 now,
		UsageCoreNanoSeconds: ptr(usage),
		UsageNanoCores:       p.cpu.observe(c, cpuSample{at: now.Time, usage: usage}),
	}
}

// sumCPU is the pod's CPU when its cgroup cannot be read: its
// containers' usage summed, as the kubelet sums it, and their rates
// summed only when every container has one. The kubelet counts a missing
// rate as 0, which would understate the pod; no rate says "unknown". It
// is nil while no container reports either.
func sumCPU(ctrs []statsapi.ContainerStats, now metav1.Time) *statsapi.CPUStats {
	var usage, rate *uint64
	allRated := len(ctrs) > 0
	for _, c := range ctrs {
		if c.CPU == nil {
			allRated = false
			continue
		}
		usage = addUsage(usage, c.CPU.UsageCoreNanoSeconds)
		if c.CPU.UsageNanoCores == nil {
			allRated = false
		}
		rate = addUsage(rate, c.CPU.UsageNanoCores)
	}
	if !allRated {
		rate = nil
	}
	if usage == nil && rate == nil {
		return nil
	}
	return &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: usage, UsageNanoCores: rate}
}

// cpuFromCRI is the runtime's CPU report in the Summary's terms.
// containerd computes UsageNanoCores itself, against its previous
// ListContainerStats (0 on the first); a runtime may leave it out.
func cpuFromCRI(c *runtimeapi.CpuUsage, now metav1.Time) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	s := &statsapi.CPUStats{
		Time:                 now,
		UsageCoreNanoSeconds: uint64Value(c.GetUsageCoreNanoSeconds()),
		UsageNanoCores:       uint64Value(c.GetUsageNanoCores()),
	}
	if c.GetTimestamp() != 0 {
		s.Time = nanoTime(c.GetTimestamp())
	}
	return s
}
