// Package cm is berth's container manager: what the node has to give to pods
// (capacity and allocatable) and, as it grows, the QoS and pod cgroups.
package cm

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MachineCapacity reports the node's CPUs, memory and pod slots, as the
// kubelet reports capacity from cAdvisor's machine info.
func MachineCapacity(meminfoPath string, maxPods int32) (v1.ResourceList, error) {
	mem, err := memTotal(meminfoPath)
	if err != nil {
		return nil, err
	}
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}, nil
}

// memTotal reads MemTotal, in bytes, from a meminfo file.
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read memory capacity: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: MemTotal %q: %w", path, fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}
