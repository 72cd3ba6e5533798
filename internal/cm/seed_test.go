package cm

import (
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestSeedExample is the worked example of seed 004: a node with 3 CPUs and
// 8 GiB (allocatable = capacity, nothing reserved, qosReserved memory=100%)
// running pod-guaranteed-1, pod-burstable-1 and pod-besteffort-1.
func TestSeedExample(t *testing.T) {
	capacity := res("cpu", "3", "memory", "8Gi", "pods", "110")
	guaranteed := podOf("pod-guaranteed-1",
		ctr("container3", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")))
	burstable := podOf("pod-burstable-1",
		ctr("container1", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")),
		ctr("container2", res("cpu", "1", "memory", "1Gi"), res("cpu", "2", "memory", "2Gi")))
	besteffort := podOf("pod-besteffort-1", ctr("container4", nil, nil))
	pods := []*v1.Pod{guaranteed, burstable, besteffort}

	allocatable, err := Allocatable(capacity, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if describeList(allocatable) != describeList(capacity) {
		t.Fatalf("allocatable %s, want the capacity", describeList(allocatable))
	}
	absolute := NodeAllocatableAbsolute(capacity, nil, nil)

	kubepods := KubepodsConfig(absolute, true)
	burstableQOS, besteffortQOS := QOSConfigs(pods, absolute.Memory().Value(), ptr.To[int64](100))
	guaranteedPod := PodResourceConfig(guaranteed, -1)
	burstablePod := PodResourceConfig(burstable, -1)
	besteffortPod := PodResourceConfig(besteffort, -1)

	root := KubepodsCgroup("/")
	for _, tt := range []struct {
		cgroup string
		path   CgroupName
		got    ResourceConfig
		want   string
	}{
		{"kubepods", root, kubepods, want(3072, unset, unset, 8*gi, unset)},
		{"burstable", QOSCgroup(root, v1.PodQOSBurstable), burstableQOS, want(2048, unset, unset, 7*gi, unset)},
		{"besteffort", QOSCgroup(root, v1.PodQOSBestEffort), besteffortQOS, want(2, unset, unset, 5*gi, unset)},
		{"pod-guaranteed-1", PodCgroup(root, guaranteed), guaranteedPod, want(1024, 100000, 100000, gi, unset)},
		{"pod-burstable-1", PodCgroup(root, burstable), burstablePod, want(2048, 300000, 100000, 3*gi, unset)},
		{"pod-besteffort-1", PodCgroup(root, besteffort), besteffortPod, want(2, unset, unset, unset, unset)},
	} {
		if got := describe(tt.got); got != tt.want {
			t.Errorf("%s (%s)\ngot  %s\nwant %s", tt.cgroup, tt.path.ToCgroupfs(), got, tt.want)
		}
	}
	for _, tt := range []struct{ name, got, want string }{
		{"pod-guaranteed-1", PodCgroup(root, guaranteed).ToCgroupfs(), "/kubepods/podpod-guaranteed-1"},
		{"pod-burstable-1", PodCgroup(root, burstable).ToCgroupfs(), "/kubepods/burstable/podpod-burstable-1"},
		{"pod-besteffort-1", PodCgroup(root, besteffort).ToCgroupfs(), "/kubepods/besteffort/podpod-besteffort-1"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s cgroup %q, want %q", tt.name, tt.got, tt.want)
		}
	}

	// The containers' own shares, which the runtime writes (container1,
	// container2 and container3 each request one CPU).
	containerShares := MilliCPUToShares(1000)
	if containerShares != 1024 {
		t.Errorf("container shares %d, want 1024", containerShares)
	}

	// The point of the layout: under full contention each container gets the
	// CPU it requested, whatever its QoS class. Walk the tree: at each level a
	// cgroup gets its shares' fraction of its parent's CPU. The siblings under
	// kubepods are pod-guaranteed-1, burstable and besteffort.
	topLevel := float64(*guaranteedPod.CPUShares + *burstableQOS.CPUShares + *besteffortQOS.CPUShares)
	cpus := 3.0
	// container3 is pod-guaranteed-1's only container, and pod-burstable-1
	// the burstable cgroup's only pod: each gets all of its parent's CPU.
	container3 := cpus * float64(*guaranteedPod.CPUShares) / topLevel
	podBurstableCPU := cpus * float64(*burstableQOS.CPUShares) / topLevel
	container1 := podBurstableCPU * float64(containerShares) / float64(containerShares+containerShares)
	for name, got := range map[string]float64{"container1": container1, "container2": container1, "container3": container3} {
		if math.Abs(got-1) > 0.001 {
			t.Errorf("%s gets %.4f CPUs under contention, want 1", name, got)
		}
	}
	// besteffort gets about 2 millicores.
	if got := cpus * float64(*besteffortQOS.CPUShares) / topLevel; got > 0.003 {
		t.Errorf("besteffort gets %.4f CPUs under contention, want ~0.002", got)
	}
	// Idle node: the quotas cap pod-guaranteed-1 at 1 CPU and pod-burstable-1 at 3.
	for name, rc := range map[string]ResourceConfig{"pod-guaranteed-1": guaranteedPod, "pod-burstable-1": burstablePod} {
		limit := float64(*rc.CPUQuota) / float64(*rc.CPUPeriod)
		wantLimit := map[string]float64{"pod-guaranteed-1": 1, "pod-burstable-1": 3}[name]
		if limit != wantLimit {
			t.Errorf("%s CPU limit %.2f, want %.0f", name, limit, wantLimit)
		}
	}
}
