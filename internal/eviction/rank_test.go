package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestRankMemoryPressure(t *testing.T) {
	bestEffort := newPod("best-effort", container("c"))
	under := newPod("under-request", container("c", "memory=500Mi"))
	over := newPod("over-by-200Mi", container("c", "memory=100Mi"))
	important := newPod("important-over-by-900Mi", priorityOf(100), container("c", "memory=100Mi"))
	lowPriorityUnder := newPod("low-priority-under", priorityOf(-10), container("c", "memory=1Gi"))
	noStats := newPod("no-stats", container("c", "memory=1Gi"))
	// Init containers count as the scheduler counts them: the larger of the
	// largest init container and the sum of the containers.
	initBig := newPod("init-1Gi-at-request", container("c", "memory=100Mi"), func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}}}
	})
	stats := statsFor(
		statsOf(bestEffort).memory("100Mi").build(),
		statsOf(under).memory("400Mi").build(),
		statsOf(over).memory("300Mi").build(),
		statsOf(important).memory("1000Mi").build(),
		statsOf(lowPriorityUnder).memory("10Mi").build(),
		statsOf(initBig).memory("1Gi").build(),
	)
	pods := []*v1.Pod{under, important, bestEffort, initBig, over, lowPriorityUnder, noStats}
	rankMemoryPressure(pods, stats)
	// No stats first; then over their request, lower priority first, the
	// most above request first; then the rest the same way.
	want := "no-stats,over-by-200Mi,best-effort,important-over-by-900Mi,low-priority-under,init-1Gi-at-request,under-request"
	if got := names(pods); got != want {
		t.Errorf("ranked:\n got %s\nwant %s", got, want)
	}
}

func TestRankMemoryPressureOverhead(t *testing.T) {
	// Overhead counts only with a request, as in the kubelet.
	withOverhead := func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")} }
	requested := newPod("requested", container("c", "memory=100Mi"), withOverhead)
	if got := podRequest(requested, v1.ResourceMemory); got.String() != "200Mi" {
		t.Errorf("request with overhead = %s, want 200Mi", got.String())
	}
	bestEffort := newPod("best-effort", container("c"), withOverhead)
	if got := podRequest(bestEffort, v1.ResourceMemory); !got.IsZero() {
		t.Errorf("best-effort request with overhead = %s, want 0", got.String())
	}
	podLevel := newPod("pod-level", container("c", "memory=100Mi"), func(p *v1.Pod) {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
	})
	if got := podRequest(podLevel, v1.ResourceMemory); got.String() != "1Gi" {
		t.Errorf("pod-level request = %s, want 1Gi", got.String())
	}
}

func TestRankTiesKeepTheirOrder(t *testing.T) {
	a, b, c := newPod("a", container("c")), newPod("b", container("c")), newPod("c", container("c"))
	stats := statsFor(statsOf(a).memory("1Gi").build(), statsOf(b).memory("1Gi").build(), statsOf(c).memory("1Gi").build())
	for _, order := range [][]*v1.Pod{{a, b, c}, {c, a, b}} {
		pods := append([]*v1.Pod(nil), order...)
		rankMemoryPressure(pods, stats)
		if got, want := names(pods), names(order); got != want {
			t.Errorf("ties reordered: %s, want %s", got, want)
		}
	}
}

func TestRankDiskPressure(t *testing.T) {
	underRequest := newPod("under-request", container("c", "ephemeral-storage=1Gi"))
	logsAndLayer := newPod("logs-and-layer-150Mi", container("c"))
	bigVolume := newPod("volume-1Gi", container("c"),
		volume("scratch", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}),
		volume("ram", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}))
	important := newPod("important-5Gi", priorityOf(1000), container("c"))
	stats := statsFor(
		statsOf(underRequest).container("c", "", "400Mi", "100Mi", 10).build(),
		statsOf(logsAndLayer).container("c", "", "100Mi", "50Mi", 10).build(),
		// The memory-backed emptyDir is not on the disk.
		statsOf(bigVolume).container("c", "", "10Mi", "", 10).volume("scratch", "1Gi").volume("ram", "8Gi").build(),
		statsOf(important).container("c", "", "5Gi", "", 10).build(),
	)
	pods := []*v1.Pod{underRequest, important, logsAndLayer, bigVolume}
	rankFuncs(false)[SignalNodeFsAvailable](pods, stats)
	if got, want := names(pods), "volume-1Gi,logs-and-layer-150Mi,important-5Gi,under-request"; got != want {
		t.Errorf("nodefs without imagefs:\n got %s\nwant %s", got, want)
	}
}

func TestRankDiskPressureWithImageFs(t *testing.T) {
	layer := newPod("big-layer", container("c"))
	logs := newPod("big-logs", container("c"))
	stats := statsFor(
		statsOf(layer).container("c", "", "5Gi", "1Mi", 5000).build(),
		statsOf(logs).container("c", "", "1Mi", "2Gi", 10).build(),
	)
	for _, tc := range []struct {
		withImageFs bool
		signal      Signal
		want        string
	}{
		// One disk: everything counts.
		{false, SignalNodeFsAvailable, "big-layer,big-logs"},
		{false, SignalImageFsAvailable, "big-layer,big-logs"},
		// nodefs holds logs and volumes; imagefs the writable layers.
		{true, SignalNodeFsAvailable, "big-logs,big-layer"},
		{true, SignalImageFsAvailable, "big-layer,big-logs"},
		// Inodes: the layer uses 5000, the logs 1 each.
		{true, SignalImageFsInodesFree, "big-layer,big-logs"},
		{false, SignalNodeFsInodesFree, "big-layer,big-logs"},
	} {
		pods := []*v1.Pod{logs, layer}
		rankFuncs(tc.withImageFs)[tc.signal](pods, stats)
		if got := names(pods); got != tc.want {
			t.Errorf("imagefs=%v %s: %s, want %s", tc.withImageFs, tc.signal, got, tc.want)
		}
	}
}

func TestRankPIDPressure(t *testing.T) {
	few := newPod("10-processes")
	many := newPod("100-processes")
	important := newPod("important-1000-processes", priorityOf(10))
	unknown := newPod("unknown-count")
	stats := statsFor(
		statsOf(few).processes(10).build(),
		statsOf(many).processes(100).build(),
		statsOf(important).processes(1000).build(),
		statsOf(unknown).build(),
	)
	pods := []*v1.Pod{important, few, unknown, many}
	rankPIDPressure(pods, stats)
	if got, want := names(pods), "100-processes,10-processes,unknown-count,important-1000-processes"; got != want {
		t.Errorf("ranked %s, want %s", got, want)
	}
}

func TestRankFuncsCoverEverySignal(t *testing.T) {
	for _, withImageFs := range []bool{false, true} {
		ranks := rankFuncs(withImageFs)
		for _, s := range Signals() {
			if ranks[s] == nil {
				t.Errorf("imagefs=%v: no ranking for %s", withImageFs, s)
			}
		}
	}
}

func TestCmpBool(t *testing.T) {
	for _, tc := range []struct {
		a, b bool
		want int
	}{{true, true, 0}, {false, false, 0}, {true, false, -1}, {false, true, 1}} {
		if got := cmpBool(tc.a, tc.b); got != tc.want {
			t.Errorf("cmpBool(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if got := priority(newPod("a"), newPod("b", func(p *v1.Pod) { p.Spec.Priority = ptr.To(int32(0)) })); got != 0 {
		t.Errorf("no priority and priority 0 compare %d, want 0", got)
	}
}
