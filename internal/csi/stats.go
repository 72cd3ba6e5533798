package csi

import (
	"context"
	"errors"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// statsTimeout bounds one driver's NodeGetVolumeStats for /stats/summary,
// which must not wait for a hung driver as long as a mount may.
const statsTimeout = 10 * time.Second

// statsPeriod is how long a pod's CSI volume stats are reused before the
// drivers are asked again: the kubelet's volumeStatsAggPeriod.
const statsPeriod = time.Minute

// podStats are the last stats of a pod's CSI volumes.
type podStats struct {
	at         time.Time
	entries    []statsapi.VolumeStats
	refreshing bool
}

// VolumeStats are the stats of the pod's published CSI volumes whose
// drivers report usage (GET_VOLUME_STATS), as the kubelet's CSI metrics
// provider: the volume's name, its claim for a PVC-backed one, bytes and
// inodes. As the kubelet's volume stat calculator, it answers the last
// reading at once and has the drivers asked again in the background once
// it is statsPeriod old, so that a hung driver holds back neither
// /stats/summary nor the eviction manager. A volume that is not published,
// or whose driver has no stats, is left out.
func (p *PodVolumes) VolumeStats(_ context.Context, pod *v1.Pod, now metav1.Time) []statsapi.VolumeStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.resolved[pod.UID]) == 0 {
		delete(p.stats, pod.UID)
		return nil
	}
	st := p.stats[pod.UID]
	if st == nil {
		st = &podStats{}
		p.stats[pod.UID] = st
	}
	if !st.refreshing && (st.at.IsZero() || now.Sub(st.at) >= statsPeriod) {
		st.refreshing = true
		// Bounded by statsTimeout per volume; it holds no lock while the
		// drivers answer.
		p.statsJobs.Go(func() {
			entries := p.measure(pod.DeepCopy(), now)
			p.mu.Lock()
			st.at, st.entries, st.refreshing = now.Time, entries, false
			p.mu.Unlock()
		})
	}
	return slices.Clone(st.entries)
}

// measure asks the drivers for the stats of the pod's volumes set up.
func (p *PodVolumes) measure(pod *v1.Pod, now metav1.Time) []statsapi.VolumeStats {
	var out []statsapi.VolumeStats
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if !Handled(vol) {
			continue
		}
		p.mu.Lock()
		r, ok := p.resolved[pod.UID][vol.Name]
		p.mu.Unlock()
		if !ok { // not set up (yet, or since a restart)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
		st, err := p.m.Stats(ctx, pod.UID, r.src.VolumeName)
		cancel()
		if err != nil {
			if !errors.Is(err, ErrStatsNotSupported) {
				p.log.Debug("CSI volume stats unknown", "pod", pod.Namespace+"/"+pod.Name, "volume", vol.Name, "err", err)
			}
			continue
		}
		out = append(out, podVolumeStats(pod, vol, st, now))
	}
	return out
}

// WaitStats waits for the stats readings in flight (tests, shutdown).
func (p *PodVolumes) WaitStats() { p.statsJobs.Wait() }

// podVolumeStats is a volume's entry of the summary.
func podVolumeStats(pod *v1.Pod, vol *v1.Volume, st VolumeStats, now metav1.Time) statsapi.VolumeStats {
	u := func(n int64) *uint64 {
		v := uint64(max(n, 0))
		return &v
	}
	vs := statsapi.VolumeStats{Name: vol.Name, FsStats: statsapi.FsStats{
		Time:           now,
		AvailableBytes: u(st.AvailableBytes), CapacityBytes: u(st.CapacityBytes), UsedBytes: u(st.UsedBytes),
		InodesFree: u(st.InodesFree), Inodes: u(st.Inodes), InodesUsed: u(st.InodesUsed),
	}}
	if claim, _, _, ok := ClaimOf(pod, vol); ok {
		vs.PVCRef = &statsapi.PVCReference{Name: claim, Namespace: pod.Namespace}
	}
	return vs
}
