package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

func TestMakeObservations(t *testing.T) {
	p := newPod("a")
	s := newSummary(t0).
		memory("1Gi", "3Gi").
		podsMemory("512Mi", "2Gi").
		nodeFs("10Gi", "100Gi", 900, 1000).
		imageFs("5Gi", "50Gi", 90, 100).
		pids(4096, 96).
		pod(statsOf(p).memory("1Gi").build()).
		build()
	obs, stats := makeObservations(s)
	for _, tc := range []struct {
		signal              Signal
		available, capacity string
	}{
		{SignalMemoryAvailable, "1Gi", "4Gi"},
		{SignalAllocatableMemoryAvailable, "512Mi", "2560Mi"},
		{SignalNodeFsAvailable, "10Gi", "100Gi"},
		{SignalNodeFsInodesFree, "900", "1k"},
		{SignalImageFsAvailable, "5Gi", "50Gi"},
		{SignalImageFsInodesFree, "90", "100"},
		// Counts of processes are decimal, as the kubelet has them.
		{SignalPIDAvailable, "4k", "4096"},
	} {
		o, ok := obs[tc.signal]
		if !ok {
			t.Errorf("%s: not observed", tc.signal)
			continue
		}
		if got := o.available.String(); got != tc.available {
			t.Errorf("%s: available %s, want %s", tc.signal, got, tc.available)
		}
		if got := o.capacity.String(); got != tc.capacity {
			t.Errorf("%s: capacity %s, want %s", tc.signal, got, tc.capacity)
		}
		if !o.time.Equal(t0) {
			t.Errorf("%s: time %v, want %v", tc.signal, o.time, t0)
		}
	}
	if _, ok := stats(p); !ok {
		t.Error("the pod's stats are not found by its UID")
	}
	if _, ok := stats(newPod("other")); ok {
		t.Error("stats found for a pod the summary does not have")
	}
}

func TestMakeObservationsPartial(t *testing.T) {
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		// Working set unknown: memory is not observed.
		Memory: &statsapi.MemoryStats{AvailableBytes: ptr.To(uint64(1))},
		// Bytes known, inodes not.
		Fs: &statsapi.FsStats{AvailableBytes: ptr.To(uint64(1)), CapacityBytes: ptr.To(uint64(2))},
		// A runtime without an image filesystem.
		Runtime: &statsapi.RuntimeStats{},
		// Processes unknown.
		Rlimit: &statsapi.RlimitStats{MaxPID: ptr.To(int64(10))},
		// Other system containers do not count as the pods' cgroup.
		SystemContainers: []statsapi.ContainerStats{{Name: statsapi.SystemContainerKubelet, Memory: &statsapi.MemoryStats{AvailableBytes: ptr.To(uint64(1)), WorkingSetBytes: ptr.To(uint64(1))}}},
	}}
	obs, _ := makeObservations(s)
	if len(obs) != 1 {
		t.Errorf("observed %v, want only nodefs.available", obs)
	}
	if _, ok := obs[SignalNodeFsAvailable]; !ok {
		t.Error("nodefs.available not observed")
	}
	if obs, _ := makeObservations(&statsapi.Summary{}); len(obs) != 0 {
		t.Errorf("an empty summary observed %v", obs)
	}
}

func TestPodDiskUsage(t *testing.T) {
	p := newPod("a",
		volume("scratch", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}),
		volume("ram", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}),
		volume("host", v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data"}}),
		volume("cfg", v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}),
		volume("token", v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}),
	)
	ps := statsOf(p).
		container("c1", "", "100Mi", "10Mi", 50).
		container("c2", "", "200Mi", "", 5).
		volume("scratch", "1Gi").volume("ram", "4Gi").volume("host", "2Gi").volume("cfg", "1Mi").volume("token", "1Mi").
		build()
	for _, tc := range []struct {
		measure []fsStatsType
		r       v1.ResourceName
		want    string
	}{
		{[]fsStatsType{fsStatsRoot}, v1.ResourceEphemeralStorage, "300Mi"},
		{[]fsStatsType{fsStatsLogs}, v1.ResourceEphemeralStorage, "10Mi"},
		// Memory-backed emptyDirs and secrets are not on the disk.
		{[]fsStatsType{fsStatsLocalVolumeSource}, v1.ResourceEphemeralStorage, "3073Mi"},
		{[]fsStatsType{fsStatsRoot, fsStatsLogs, fsStatsLocalVolumeSource}, v1.ResourceEphemeralStorage, "3383Mi"},
		{[]fsStatsType{fsStatsRoot}, resourceInodes, "55"},
		{[]fsStatsType{fsStatsRoot, fsStatsLogs, fsStatsLocalVolumeSource}, resourceInodes, "59"},
	} {
		got := podDiskUsage(ps, p, tc.measure, tc.r)
		if got.String() != tc.want {
			t.Errorf("%v %s = %s, want %s", tc.measure, tc.r, got.String(), tc.want)
		}
	}
}
