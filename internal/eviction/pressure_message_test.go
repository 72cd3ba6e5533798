package eviction

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The parts of the kubelet's memory and PID eviction messages beyond the
// containers' own sentences (pkg/kubelet/eviction/helpers.go,
// evictionMessage and makeSignalObservations).
func TestPressureEvictionMessage(t *testing.T) {
	memHard := threshold(t, SignalMemoryAvailable, "100Mi", 0)
	memObs := observations{SignalMemoryAvailable: {available: quantity("90Mi"), capacity: quantity("8Gi"), time: t0}}
	podLevel := func(requests v1.ResourceList) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Resources = &v1.ResourceRequirements{Requests: requests} }
	}
	initContainer := func(name, memory string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
				Name:      name,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse(memory)}},
			})
		}
	}
	sidecarPod := newPod("web", container("app", "memory=100Mi"), initContainer("proxy", "10Mi"))
	sidecarStats := statsOf(sidecarPod).memory("330Mi").
		container("app", "300Mi", "", "", 0).
		container("proxy", "30Mi", "", "", 0).
		build()
	grouped := newPod("grouped", podLevel(v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}), container("app"))
	cpuOnly := newPod("cpu-only", podLevel(v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}), container("app"))

	// pid.available is observed from the summary, as in a pass: 32768
	// PIDs, 1024 running.
	pidObs, _ := makeObservations(newSummary(t0).pids(32768, 1024).build())
	forker := newPod("forker", container("sh"))

	for _, tc := range []struct {
		name        string
		r           v1.ResourceName
		pod         *v1.Pod
		stats       statsFunc
		thresholds  []Threshold
		obs         observations
		want        string
		annotations map[string]string
	}{
		{
			name:       "an init container (a sidecar) above its request is named",
			r:          v1.ResourceMemory,
			pod:        sidecarPod,
			stats:      statsFor(sidecarStats),
			thresholds: []Threshold{memHard},
			obs:        memObs,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. " +
				"Container app was using 300Mi, request is 100Mi, has larger consumption of memory. " +
				"Container proxy was using 30Mi, request is 10Mi, has larger consumption of memory. ",
			annotations: map[string]string{
				OffendingContainersKey: "app,proxy", OffendingContainersUsageKey: "300Mi,30Mi", StarvedResourceKey: "memory",
			},
		},
		{
			// The kubelet names the pod whatever its usage, before the
			// containers.
			name:       "a pod-level memory request: the pod's usage against it",
			r:          v1.ResourceMemory,
			pod:        grouped,
			stats:      statsFor(statsOf(grouped).memory("512Mi").container("app", "500Mi", "", "", 0).build()),
			thresholds: []Threshold{memHard},
			obs:        memObs,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. " +
				"Pod grouped was using 512Mi, request is 1Gi, has larger consumption of memory. " +
				"Container app was using 500Mi, request is 0, has larger consumption of memory. ",
			annotations: map[string]string{
				OffendingPodKey: "grouped", OffendingPodUsageKey: "512Mi",
				OffendingContainersKey: "app", OffendingContainersUsageKey: "500Mi", StarvedResourceKey: "memory",
			},
		},
		{
			name:       "pod-level resources without a memory request: no pod sentence",
			r:          v1.ResourceMemory,
			pod:        cpuOnly,
			stats:      statsFor(statsOf(cpuOnly).memory("20Mi").container("app", "20Mi", "", "", 0).build()),
			thresholds: []Threshold{memHard},
			obs:        memObs,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. " +
				"Container app was using 20Mi, request is 0, has larger consumption of memory. ",
			annotations: map[string]string{
				OffendingContainersKey: "app", OffendingContainersUsageKey: "20Mi", StarvedResourceKey: "memory",
			},
		},
		{
			name:       "a pod-level memory request on a disk eviction: no pod sentence",
			r:          v1.ResourceEphemeralStorage,
			pod:        grouped,
			stats:      statsFor(statsOf(grouped).memory("512Mi").container("app", "500Mi", "1Mi", "1Mi", 1).build()),
			thresholds: nil,
			obs:        memObs,
			want: "The node was low on resource: ephemeral-storage. " +
				"Container app was using 2Mi, request is 0, has larger consumption of ephemeral-storage. ",
			annotations: map[string]string{
				OffendingContainersKey: "app", OffendingContainersUsageKey: "2Mi", StarvedResourceKey: "ephemeral-storage",
			},
		},
		{
			// 31744 available is 31Ki in binary units: the kubelet's
			// observation is decimal.
			name:       "pids: counts in decimal, no container named",
			r:          resourcePids,
			pod:        forker,
			stats:      statsFor(statsOf(forker).processes(700).container("sh", "10Mi", "", "", 0).build()),
			thresholds: []Threshold{threshold(t, SignalPIDAvailable, "32000", 0)},
			obs:        pidObs,
			want:       "The node was low on resource: pids. Threshold quantity: 32k, available: 31744. ",
			annotations: map[string]string{
				OffendingContainersKey: "", OffendingContainersUsageKey: "", StarvedResourceKey: "pids",
			},
		},
		{
			// A percentage resolves against the capacity in bytes' binary
			// form, as the kubelet's GetThresholdQuantity does.
			name:       "pids: a percentage threshold",
			r:          resourcePids,
			pod:        forker,
			stats:      statsFor(),
			thresholds: []Threshold{threshold(t, SignalPIDAvailable, "5%", 0)},
			obs:        pidObs,
			want:       "The node was low on resource: pids. Threshold quantity: 1638, available: 31744. ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, annotations := evictionMessage(tc.r, tc.pod, tc.stats, tc.thresholds, tc.obs)
			if got != tc.want {
				t.Errorf("message:\n got %q\nwant %q", got, tc.want)
			}
			if tc.annotations != nil && !maps.Equal(annotations, tc.annotations) {
				t.Errorf("annotations = %v, want %v", annotations, tc.annotations)
			}
		})
	}
}
