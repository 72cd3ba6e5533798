package csi

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodVolumeStats(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t, boundClaim("data", "pv1"), csiVolume("pv1", "data", "h1"), noAttach())
	withStats := e.driver(t, "stats.csi.example.com", rpcStats)
	register(t, e.m, withStats)
	pod := testPod("a", claimVolume("data", "data"), claimVolume("unset", "data"),
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	now := metav1.NewTime(time.Unix(1000, 0))
	if got := e.pv.VolumeStats(ctx, pod, now); len(got) != 0 {
		t.Fatalf("stats of volumes not set up: %+v", got)
	}
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	// The staging driver has no GET_VOLUME_STATS: nothing, and no call.
	e.pv.VolumeStats(ctx, pod, now)
	e.pv.WaitStats()
	if got := e.pv.VolumeStats(ctx, pod, now); len(got) != 0 || e.d.count("NodeGetVolumeStats") != 0 {
		t.Fatalf("stats of a driver without GET_VOLUME_STATS: %+v", got)
	}

	inline := noAttach()
	inline.Name = withStats.name
	inline.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}
	if _, err := e.client.StorageV1().CSIDrivers().Create(ctx, inline, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: withStats.name}}})
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[3]); err != nil {
		t.Fatal(err)
	}
	// The reading is reused for a minute, then taken again in the
	// background while the last one is answered.
	if got := e.pv.VolumeStats(ctx, pod, metav1.NewTime(now.Add(30*time.Second))); len(got) != 0 {
		t.Fatalf("a reading younger than a minute was not reused: %+v", got)
	}
	later := metav1.NewTime(now.Add(time.Minute))
	if got := e.pv.VolumeStats(ctx, pod, later); len(got) != 0 {
		t.Fatalf("the refresh did not answer the last reading at once: %+v", got)
	}
	e.pv.WaitStats()
	got := e.pv.VolumeStats(ctx, pod, later)
	if len(got) != 1 || got[0].Name != "inline" || got[0].PVCRef != nil || *got[0].CapacityBytes != 1<<30 ||
		*got[0].UsedBytes != 1<<20 || *got[0].InodesFree != 990 || !got[0].Time.Equal(&later) {
		t.Fatalf("stats %+v", got)
	}
	if withStats.lastPublish() == nil || withStats.count("NodeGetVolumeStats") != 1 {
		t.Errorf("calls %v", withStats.callList())
	}
	vs := podVolumeStats(pod, &pod.Spec.Volumes[0], VolumeStats{CapacityBytes: 5, UsedBytes: -1}, now)
	if vs.PVCRef == nil || vs.PVCRef.Name != "data" || vs.PVCRef.Namespace != "default" || *vs.UsedBytes != 0 {
		t.Errorf("claim volume entry %+v", vs)
	}
}

func TestPodVolumeStatsForgotten(t *testing.T) {
	ctx := context.Background()
	e := newPodEnv(t, boundClaim("data", "pv1"), csiVolume("pv1", "data", "h1"), noAttach())
	pod := testPod("a", claimVolume("data", "data"))
	if _, err := e.pv.SetUp(ctx, pod, &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	e.pv.VolumeStats(ctx, pod, metav1.Now())
	e.pv.WaitStats()
	if err := e.pv.TearDownPod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	e.pv.mu.Lock()
	defer e.pv.mu.Unlock()
	if len(e.pv.stats) != 0 || len(e.pv.resolved) != 0 {
		t.Errorf("a pod torn down is remembered: %v %v", e.pv.stats, e.pv.resolved)
	}
}
