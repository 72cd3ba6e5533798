package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observation is what one signal measured.
type observation struct {
	available *resource.Quantity
	capacity  *resource.Quantity
	// time is when the stats were collected; zero when unknown.
	time time.Time
}

// observations are a pass's measures, by signal. A signal the summary does
// not report has no entry, and its thresholds are skipped.
type observations map[Signal]observation

// statsFunc returns a pod's stats from the summary the pass observed.
type statsFunc func(pod *v1.Pod) (statsapi.PodStats, bool)

// makeObservations measures every signal in summary (the kubelet's
// makeSignalObservations) and returns the pods' stats by UID:
//
//   - memory.available: node memory available; capacity is available plus
//     the working set;
//   - allocatableMemory.available: the same on the "pods" system container;
//   - nodefs.*: the node's root filesystem;
//   - imagefs.*: the runtime's image filesystem;
//   - pid.available: maximum PIDs minus running processes.
func makeObservations(summary *statsapi.Summary) (observations, statsFunc) {
	obs := observations{}
	node := summary.Node
	if o, ok := memoryObservation(node.Memory); ok {
		obs[SignalMemoryAvailable] = o
	}
	for i := range node.SystemContainers {
		if c := &node.SystemContainers[i]; c.Name == statsapi.SystemContainerPods {
			if o, ok := memoryObservation(c.Memory); ok {
				obs[SignalAllocatableMemoryAvailable] = o
			}
			break
		}
	}
	fsObservations(obs, node.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if node.Runtime != nil {
		fsObservations(obs, node.Runtime.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	}
	if r := node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		// Counts, not bytes: decimal, as the kubelet has them, so that an
		// eviction message says "available: 31744", never "31Ki".
		obs[SignalPIDAvailable] = observation{
			available: resource.NewQuantity(*r.MaxPID-*r.NumOfRunningProcesses, resource.DecimalSI),
			capacity:  resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
			time:      r.Time.Time,
		}
	}
	return obs, podStatsByUID(summary.Pods)
}

func memoryObservation(m *statsapi.MemoryStats) (observation, bool) {
	if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil {
		return observation{}, false
	}
	return observation{
		available: resource.NewQuantity(int64(*m.AvailableBytes), resource.BinarySI),
		capacity:  resource.NewQuantity(int64(*m.AvailableBytes+*m.WorkingSetBytes), resource.BinarySI),
		time:      m.Time.Time,
	}, true
}

func fsObservations(obs observations, fs *statsapi.FsStats, bytes, inodes Signal) {
	if fs == nil {
		return
	}
	if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
		obs[bytes] = observation{
			available: resource.NewQuantity(int64(*fs.AvailableBytes), resource.BinarySI),
			capacity:  resource.NewQuantity(int64(*fs.CapacityBytes), resource.BinarySI),
			time:      fs.Time.Time,
		}
	}
	if fs.InodesFree != nil && fs.Inodes != nil {
		obs[inodes] = observation{
			available: resource.NewQuantity(int64(*fs.InodesFree), resource.DecimalSI),
			capacity:  resource.NewQuantity(int64(*fs.Inodes), resource.DecimalSI),
			time:      fs.Time.Time,
		}
	}
}

func podStatsByUID(pods []statsapi.PodStats) statsFunc {
	byUID := make(map[string]statsapi.PodStats, len(pods))
	for _, p := range pods {
		byUID[p.PodRef.UID] = p
	}
	return func(pod *v1.Pod) (statsapi.PodStats, bool) {
		s, ok := byUID[string(pod.UID)]
		return s, ok
	}
}
