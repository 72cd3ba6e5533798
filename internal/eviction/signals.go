package eviction

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Signal is a measure of the node that can trigger eviction (the kubelet's
// evictionapi.Signal): the amount of a resource still available.
type Signal string

// The signals berth observes, with the kubelet's names.
const (
	// SignalMemoryAvailable is the node's memory capacity minus its working
	// set, in bytes.
	SignalMemoryAvailable Signal = "memory.available"
	// SignalAllocatableMemoryAvailable is memory.available measured on the
	// cgroup that holds every pod: pods may not eat into what the node
	// reserves for itself.
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	// SignalNodeFsAvailable is the space available on the filesystem that
	// holds volumes, logs and the kubelet's (berth's) state.
	SignalNodeFsAvailable Signal = "nodefs.available"
	// SignalNodeFsInodesFree is the inodes available on that filesystem.
	SignalNodeFsInodesFree Signal = "nodefs.inodesFree"
	// SignalImageFsAvailable is the space available on the filesystem that
	// holds the runtime's images and writable layers.
	SignalImageFsAvailable Signal = "imagefs.available"
	// SignalImageFsInodesFree is the inodes available on that filesystem.
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	// SignalPIDAvailable is the process IDs available: the node's maximum
	// minus the processes running.
	SignalPIDAvailable Signal = "pid.available"
)

// ThresholdOperator says how an observation is compared with a threshold.
type ThresholdOperator string

// OpLessThan is the only operator: a threshold is met when what is
// available falls below it.
const OpLessThan ThresholdOperator = "LessThan"

// Resources the kubelet reclaims that are not core/v1 resource names; they
// appear in events ("Attempting to reclaim inodes") and messages.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePids   v1.ResourceName = "pids"
)

// Signals returns every signal berth knows, in eviction priority order:
// memory first (the kernel's OOM killer is the alternative), then disk, then
// process IDs.
func Signals() []Signal {
	return []Signal{
		SignalMemoryAvailable,
		SignalAllocatableMemoryAvailable,
		SignalNodeFsAvailable,
		SignalNodeFsInodesFree,
		SignalImageFsAvailable,
		SignalImageFsInodesFree,
		SignalPIDAvailable,
	}
}

// signalRank is the signal's place in Signals, or -1 for an unknown one.
func signalRank(s Signal) int {
	for i, known := range Signals() {
		if known == s {
			return i
		}
	}
	return -1
}

func validSignal(s Signal) bool { return signalRank(s) >= 0 }

// signalNames lists the signals for error messages.
func signalNames() string {
	names := make([]string, 0, len(Signals()))
	for _, s := range Signals() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// nodeCondition is the node condition a met threshold on s reports.
func nodeCondition(s Signal) (v1.NodeConditionType, bool) {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.NodeMemoryPressure, true
	case SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsAvailable, SignalImageFsInodesFree:
		return v1.NodeDiskPressure, true
	case SignalPIDAvailable:
		return v1.NodePIDPressure, true
	}
	return "", false
}

// starvedResource is the resource that evicting a pod reclaims for s.
func starvedResource(s Signal) (v1.ResourceName, bool) {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.ResourceMemory, true
	case SignalNodeFsAvailable, SignalImageFsAvailable:
		return v1.ResourceEphemeralStorage, true
	case SignalNodeFsInodesFree, SignalImageFsInodesFree:
		return resourceInodes, true
	case SignalPIDAvailable:
		return resourcePids, true
	}
	return "", false
}

// DefaultEvictionHard returns the kubelet's default evictionHard on Linux.
// As in the kubelet, setting evictionHard replaces the whole map unless
// mergeDefaultEvictionSettings is set; the caller does the merging.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		string(SignalMemoryAvailable):   "100Mi",
		string(SignalNodeFsAvailable):   "10%",
		string(SignalNodeFsInodesFree):  "5%",
		string(SignalImageFsAvailable):  "15%",
		string(SignalImageFsInodesFree): "5%",
	}
}
