package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// memoryReading is one cgroup's (or the node's) memory, as cadvisor reads it.
type memoryReading struct {
	Usage      uint64
	WorkingSet uint64
	RSS        uint64
	PageFaults uint64
	MajorFault uint64
	// Limit is what AvailableBytes is measured against: the cgroup's
	// limit, or the node's capacity; nil when unlimited.
	Limit *uint64
}

// unlimitedMemory is the kubelet's threshold above which a memory limit
// means "none": the kernel's "unlimited" is LONG_MAX rounded to a page,
// and no machine has 4 EiB.
const unlimitedMemory = uint64(1) << 62

// workingSet is usage less the inactive file cache, which the kernel can
// drop at once: the kubelet's (and cadvisor's) working set, the number
// memory eviction is decided on.
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile >= usage {
		return 0
	}
	return usage - inactiveFile
}

// availableBytes is limit − working set, never below zero.
func availableBytes(limit, ws uint64) uint64 {
	if ws >= limit {
		return 0
	}
	return limit - ws
}

// limitOf turns a limit read from a cgroup into Limit's meaning.
func limitOf(v uint64, ok bool) *uint64 {
	if !ok || v > unlimitedMemory {
		return nil
	}
	return &v
}

// toStats is the reading in the Summary's terms, at time now.
func (m memoryReading) toStats(now metav1.Time) *statsapi.MemoryStats {
	s := &statsapi.MemoryStats{
		Time:            now,
		UsageBytes:      ptr(m.Usage),
		WorkingSetBytes: ptr(m.WorkingSet),
		RSSBytes:        ptr(m.RSS),
		PageFaults:      ptr(m.PageFaults),
		MajorPageFaults: ptr(m.MajorFault),
	}
	if m.Limit != nil {
		s.AvailableBytes = ptr(availableBytes(*m.Limit, m.WorkingSet))
	}
	return s
}

// parseFlatKeyed parses a cgroup "flat keyed" file such as memory.stat
// ("<key> <value>" per line) into a map. Keys whose value is not a number
// are left out: a newer kernel may add fields berth does not read.
func parseFlatKeyed(file string, data []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := bytes.Cut(bytes.TrimSpace(sc.Bytes()), []byte(" "))
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			continue
		}
		out[string(k)] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	return out, nil
}

// parseMeminfo parses /proc/meminfo into bytes by field name.
func parseMeminfo(file string, data []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		unit := uint64(1)
		if n, found := bytes.CutSuffix(v, []byte(" kB")); found {
			v, unit = n, 1024
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			continue
		}
		out[string(k)] = n * unit
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
