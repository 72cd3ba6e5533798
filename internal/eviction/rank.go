package eviction

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// rankFunc orders pods for eviction, the first to go first.
type rankFunc func(pods []*v1.Pod, stats statsFunc)

// cmpFunc compares two pods for eviction: negative when p1 goes before p2.
type cmpFunc func(p1, p2 *v1.Pod) int

// orderedBy sorts by the first comparison that tells the pods apart. The
// sort is stable: pods no comparison tells apart keep the order they came
// in (the kubelet's sort is not, so its ties fall either way).
func orderedBy(cmps ...cmpFunc) func(pods []*v1.Pod) {
	return func(pods []*v1.Pod) {
		slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
			for _, c := range cmps {
				if r := c(a, b); r != 0 {
					return r
				}
			}
			return 0
		})
	}
}

// rankMemoryPressure puts first the pods using more memory than they
// request, then the lower priorities, then the pods using the most memory
// above their request.
func rankMemoryPressure(pods []*v1.Pod, stats statsFunc) {
	orderedBy(exceedMemoryRequests(stats), priority, memory(stats))(pods)
}

// rankPIDPressure puts first the lower priorities, then the pods running the
// most processes.
func rankPIDPressure(pods []*v1.Pod, stats statsFunc) {
	orderedBy(priority, processes(stats))(pods)
}

// rankDiskPressureFunc ranks by the disk (or inodes) measured in fsStats:
// first the pods using more than they request, then the lower priorities,
// then the pods using the most above their ephemeral-storage request.
func rankDiskPressureFunc(fsStats []fsStatsType, r v1.ResourceName) rankFunc {
	return func(pods []*v1.Pod, stats statsFunc) {
		orderedBy(exceedDiskRequests(stats, fsStats, r), priority, disk(stats, fsStats, r))(pods)
	}
}

// rankFuncs maps each signal to its ranking (the kubelet's
// buildSignalToRankFunc). With an image filesystem of its own, pods are
// ranked for nodefs by their logs and local volumes, and for imagefs by
// their writable layers; otherwise both filesystems are one and pods are
// ranked by all three.
func rankFuncs(withImageFs bool) map[Signal]rankFunc {
	m := map[Signal]rankFunc{
		SignalMemoryAvailable:            rankMemoryPressure,
		SignalAllocatableMemoryAvailable: rankMemoryPressure,
		SignalPIDAvailable:               rankPIDPressure,
	}
	nodeFs := []fsStatsType{fsStatsRoot, fsStatsLogs, fsStatsLocalVolumeSource}
	imageFs := nodeFs
	if withImageFs {
		nodeFs = []fsStatsType{fsStatsLogs, fsStatsLocalVolumeSource}
		imageFs = []fsStatsType{fsStatsRoot}
	}
	m[SignalNodeFsAvailable] = rankDiskPressureFunc(nodeFs, v1.ResourceEphemeralStorage)
	m[SignalNodeFsInodesFree] = rankDiskPressureFunc(nodeFs, resourceInodes)
	m[SignalImageFsAvailable] = rankDiskPressureFunc(imageFs, v1.ResourceEphemeralStorage)
	m[SignalImageFsInodesFree] = rankDiskPressureFunc(imageFs, resourceInodes)
	return m
}

// cmpBool puts true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// statsFound compares on whether stats exist: a pod without stats goes
// first, as the kubelet cannot tell how much it uses. decided is false when
// both have stats.
func statsFound(stats statsFunc, p1, p2 *v1.Pod) (s1, s2 statsapi.PodStats, r int, decided bool) {
	s1, ok1 := stats(p1)
	s2, ok2 := stats(p2)
	if !ok1 || !ok2 {
		return s1, s2, cmpBool(!ok1, !ok2), true
	}
	return s1, s2, 0, false
}

// priority puts the lower priority first.
func priority(p1, p2 *v1.Pod) int {
	return cmp.Compare(corev1helpers.PodPriority(p1), corev1helpers.PodPriority(p2))
}

func exceedMemoryRequests(stats statsFunc) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, s2, r, decided := statsFound(stats, p1, p2)
		if decided {
			return r
		}
		u1, u2 := memoryUsage(s1.Memory), memoryUsage(s2.Memory)
		return cmpBool(u1.Cmp(podRequest(p1, v1.ResourceMemory)) > 0, u2.Cmp(podRequest(p2, v1.ResourceMemory)) > 0)
	}
}

func memory(stats statsFunc) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, s2, r, decided := statsFound(stats, p1, p2)
		if decided {
			return r
		}
		u1 := memoryUsage(s1.Memory)
		u1.Sub(podRequest(p1, v1.ResourceMemory))
		u2 := memoryUsage(s2.Memory)
		u2.Sub(podRequest(p2, v1.ResourceMemory))
		return u2.Cmp(u1)
	}
}

func exceedDiskRequests(stats statsFunc, fsStats []fsStatsType, r v1.ResourceName) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, s2, res, decided := statsFound(stats, p1, p2)
		if decided {
			return res
		}
		u1 := podDiskUsage(s1, p1, fsStats, r)
		u2 := podDiskUsage(s2, p2, fsStats, r)
		return cmpBool(u1.Cmp(podRequest(p1, r)) > 0, u2.Cmp(podRequest(p2, r)) > 0)
	}
}

func disk(stats statsFunc, fsStats []fsStatsType, r v1.ResourceName) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, s2, res, decided := statsFound(stats, p1, p2)
		if decided {
			return res
		}
		// The ephemeral-storage request is taken off inode counts too, as
		// the kubelet does: no pod can request inodes.
		u1 := podDiskUsage(s1, p1, fsStats, r)
		u1.Sub(podRequest(p1, v1.ResourceEphemeralStorage))
		u2 := podDiskUsage(s2, p2, fsStats, r)
		u2.Sub(podRequest(p2, v1.ResourceEphemeralStorage))
		return u2.Cmp(u1)
	}
}

func processes(stats statsFunc) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, s2, r, decided := statsFound(stats, p1, p2)
		if decided {
			return r
		}
		return cmp.Compare(processCount(s2.ProcessStats), processCount(s1.ProcessStats))
	}
}

// podRequest is the pod's request of r: pod-level when set, otherwise its
// containers' (init containers included, as the scheduler counts them),
// plus the pod overhead when the request is not zero.
func podRequest(pod *v1.Pod, r v1.ResourceName) resource.Quantity {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})[r]
	if overhead, ok := pod.Spec.Overhead[r]; ok && q.Sign() > 0 {
		q.Add(overhead)
	}
	return q
}

func memoryUsage(m *statsapi.MemoryStats) resource.Quantity {
	if m == nil || m.WorkingSetBytes == nil {
		return resource.Quantity{Format: resource.BinarySI}
	}
	return *resource.NewQuantity(int64(*m.WorkingSetBytes), resource.BinarySI)
}

func processCount(p *statsapi.ProcessStats) uint64 {
	if p == nil || p.ProcessCount == nil {
		return 0
	}
	return *p.ProcessCount
}
