package cm

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/qos"
)

// benchNodePods are n defaulted pods (requests filled in from limits, as
// the API server leaves them) of a busy node: a fifth Guaranteed, half
// Burstable, the rest BestEffort; one to three containers, an init
// container in every fourth pod, a sidecar in every seventh, a runtime
// class overhead in every tenth.
func benchNodePods(n int) []*v1.Pod {
	cpus := []string{"100m", "250m", "500m", "1", "2"}
	mems := []string{"128Mi", "256Mi", "512Mi", "1Gi", "4Gi"}
	pods := make([]*v1.Pod, n)
	for i := range pods {
		cpu, mem := cpus[i%len(cpus)], mems[(i/2)%len(mems)]
		var resources func(c int) (requests, limits v1.ResourceList)
		switch i % 10 {
		case 0, 1:
			resources = func(int) (v1.ResourceList, v1.ResourceList) {
				return res("cpu", cpu, "memory", mem), res("cpu", cpu, "memory", mem)
			}
		case 2, 3, 4, 5, 6:
			resources = func(c int) (v1.ResourceList, v1.ResourceList) {
				requests := res("cpu", cpu, "memory", mem)
				// Requests only; limits everywhere (the pod cgroup gets a
				// quota and a memory limit); or limits on the first
				// container only (it gets neither).
				switch (i / 10) % 3 {
				case 1:
					return requests, res("cpu", "4", "memory", "8Gi")
				case 2:
					if c == 0 {
						return requests, res("cpu", "2", "memory", "2Gi")
					}
				}
				return requests, nil
			}
		default:
			resources = func(int) (v1.ResourceList, v1.ResourceList) {
				// Not cpu or memory: still BestEffort.
				if i%3 == 0 {
					return res("ephemeral-storage", "1Gi"), nil
				}
				return nil, nil
			}
		}
		var containers []v1.Container
		for c := range 1 + i%3 {
			containers = append(containers, ctr(fmt.Sprintf("c%d", c), nil, nil))
			containers[c].Resources.Requests, containers[c].Resources.Limits = resources(c)
		}
		p := podOf(fmt.Sprintf("7c1e%04x-5e1f-4c2a-9b7d-%012x", i, 0xa1b2c3d40000+i), containers...)
		if i%4 == 0 {
			init := ctr("init", nil, nil)
			init.Resources.Requests, init.Resources.Limits = resources(1)
			p.Spec.InitContainers = append(p.Spec.InitContainers, init)
		}
		if i%7 == 0 {
			requests, limits := resources(1)
			p.Spec.InitContainers = append(p.Spec.InitContainers, sidecar("istio-proxy", requests, limits))
		}
		if i%10 == 1 {
			p.Spec.Overhead = res("cpu", "250m", "memory", "160Mi")
		}
		pods[i] = p
	}
	return pods
}

// cgroupValues is what the hierarchy computes for a node's pods as
// EnsurePod and updateQOSLocked do: each pod's cgroup path and values (its
// cpu.weight as the cgroup v2 writer converts it), and the kubepods,
// burstable and besteffort values. sum folds them into one number to
// compare between iterations.
func cgroupValues(pods []*v1.Pod, kubepods CgroupName, allocatable v1.ResourceList, reserve *int64) (sum uint64) {
	for _, p := range pods {
		path := PodCgroup(kubepods, p).ToCgroupfs()
		rc := PodResourceConfig(p, 4096)
		sum += uint64(len(path)) + SharesToWeight(*rc.CPUShares)
		if rc.CPUQuota != nil {
			sum += uint64(*rc.CPUQuota) + *rc.CPUPeriod
		}
		if rc.Memory != nil {
			sum += uint64(*rc.Memory)
		}
	}
	kp := KubepodsConfig(allocatable, true)
	burstable, besteffort := QOSConfigs(pods, allocatable.Memory().Value(), reserve)
	return sum + SharesToWeight(*kp.CPUShares) + uint64(*kp.Memory) +
		SharesToWeight(*burstable.CPUShares) + uint64(*burstable.Memory) +
		SharesToWeight(*besteffort.CPUShares) + uint64(*besteffort.Memory)
}

// BenchmarkCgroupValues500Pods times cgroupValues for 500 pods with
// qosReserved memory=50%: PodCgroup, PodResourceConfig and SharesToWeight
// per pod (qos.PodQOSClass twice per pod, as the hierarchy calls it), then
// KubepodsConfig and one QOSConfigs over all of them. The hierarchy calls
// QOSConfigs again at every EnsurePod and RemovePod; one call is counted
// here.
func BenchmarkCgroupValues500Pods(b *testing.B) {
	pods := benchNodePods(500)
	classes := map[v1.PodQOSClass]int{}
	for _, p := range pods {
		classes[qos.PodQOSClass(p)]++
	}
	if classes[v1.PodQOSGuaranteed] == 0 || classes[v1.PodQOSBurstable] == 0 || classes[v1.PodQOSBestEffort] == 0 {
		b.Fatalf("classes %v: want all three", classes)
	}
	kubepods := KubepodsCgroup("/")
	allocatable := res("cpu", "190", "memory", "1000Gi", string(ResourcePID), "250000")
	reserve := ptr.To[int64](50)
	want := cgroupValues(pods, kubepods, allocatable, reserve)
	b.ReportAllocs()
	for b.Loop() {
		if got := cgroupValues(pods, kubepods, allocatable, reserve); got != want {
			b.Fatalf("values summed to %d, then %d", want, got)
		}
	}
}
