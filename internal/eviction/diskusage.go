package eviction

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fsStatsType is one part of a pod's disk usage.
type fsStatsType string

const (
	// fsStatsRoot is the containers' writable layers.
	fsStatsRoot fsStatsType = "root"
	// fsStatsLogs is the containers' logs.
	fsStatsLogs fsStatsType = "logs"
	// fsStatsLocalVolumeSource is the pod's volumes on the node's disk.
	fsStatsLocalVolumeSource fsStatsType = "localVolumeSource"
)

// podDiskUsage is the pod's bytes (r ephemeral-storage) or inodes (r
// inodes) in the parts measured (the kubelet's podDiskUsage).
func podDiskUsage(stats statsapi.PodStats, pod *v1.Pod, measure []fsStatsType, r v1.ResourceName) resource.Quantity {
	total := resource.Quantity{Format: resource.BinarySI}
	if r == resourceInodes {
		total.Format = resource.DecimalSI
	}
	add := func(fs *statsapi.FsStats) {
		total.Add(fsUsage(fs, r))
	}
	for _, c := range stats.Containers {
		if slices.Contains(measure, fsStatsRoot) {
			add(c.Rootfs)
		}
		if slices.Contains(measure, fsStatsLogs) {
			add(c.Logs)
		}
	}
	if slices.Contains(measure, fsStatsLocalVolumeSource) {
		for _, name := range localVolumeNames(pod) {
			for i := range stats.VolumeStats {
				if stats.VolumeStats[i].Name == name {
					add(&stats.VolumeStats[i].FsStats)
					break
				}
			}
		}
	}
	return total
}

// fsUsage is the bytes or inodes fs uses; zero when unknown.
func fsUsage(fs *statsapi.FsStats, r v1.ResourceName) resource.Quantity {
	if fs == nil {
		return resource.Quantity{}
	}
	if r == resourceInodes {
		if fs.InodesUsed == nil {
			return resource.Quantity{}
		}
		return *resource.NewQuantity(int64(*fs.InodesUsed), resource.DecimalSI)
	}
	if fs.UsedBytes == nil {
		return resource.Quantity{}
	}
	return *resource.NewQuantity(int64(*fs.UsedBytes), resource.BinarySI)
}

// localVolumeNames are the pod's volumes that live on the node's disk, as
// the kubelet counts them: host paths, disk-backed emptyDirs, configMaps and
// git repositories.
func localVolumeNames(pod *v1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil ||
			(v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory) ||
			v.ConfigMap != nil ||
			v.GitRepo != nil {
			out = append(out, v.Name)
		}
	}
	return out
}
