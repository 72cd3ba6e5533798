package cm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestQOSConfigs(t *testing.T) {
	guaranteed := func(uid, cpu, mem string) *v1.Pod {
		return podOf(uid, ctr("c", res("cpu", cpu, "memory", mem), res("cpu", cpu, "memory", mem)))
	}
	burstable := func(uid, cpu, mem string) *v1.Pod {
		return podOf(uid, ctr("c", res("cpu", cpu, "memory", mem), nil))
	}
	besteffort := podOf("be", ctr("c", nil, nil))

	tests := []struct {
		name                  string
		pods                  []*v1.Pod
		allocatable           int64
		percent               *int64
		burstable, besteffort string
	}{{
		name:        "no pods, no qosReserved",
		allocatable: 8 * gi,
		burstable:   want(MinShares, unset, unset, unset, unset),
		besteffort:  want(MinShares, unset, unset, unset, unset),
	}, {
		name:        "burstable shares are those of the Burstable pods' summed requests",
		pods:        []*v1.Pod{burstable("b1", "250m", "1Gi"), burstable("b2", "500m", "1Gi"), guaranteed("g", "4", "1Gi"), besteffort},
		allocatable: 8 * gi,
		burstable:   want(768, unset, unset, unset, unset),
		besteffort:  want(MinShares, unset, unset, unset, unset),
	}, {
		name: "the sum is converted, not the shares summed",
		// 3 x 1m is 3 shares; 3 x MilliCPUToShares(1m) would be 6.
		pods:        []*v1.Pod{burstable("b1", "1m", "1Mi"), burstable("b2", "1m", "1Mi"), burstable("b3", "1m", "1Mi")},
		allocatable: 8 * gi,
		burstable:   want(3, unset, unset, unset, unset),
		besteffort:  want(MinShares, unset, unset, unset, unset),
	}, {
		name:        "qosReserved unset: no memory limits whatever the pods",
		pods:        []*v1.Pod{guaranteed("g", "1", "4Gi"), burstable("b", "1", "2Gi")},
		allocatable: 8 * gi,
		burstable:   want(1024, unset, unset, unset, unset),
		besteffort:  want(MinShares, unset, unset, unset, unset),
	}, {
		name:        "qosReserved 50%",
		pods:        []*v1.Pod{guaranteed("g", "1", "2Gi"), burstable("b", "1", "4Gi"), besteffort},
		allocatable: 10 * gi,
		percent:     ptr.To[int64](50),
		burstable:   want(1024, unset, unset, 9*gi, unset),
		besteffort:  want(MinShares, unset, unset, 7*gi, unset),
	}, {
		name:        "qosReserved 0%: limits at allocatable",
		pods:        []*v1.Pod{guaranteed("g", "1", "2Gi"), burstable("b", "1", "4Gi")},
		allocatable: 10 * gi,
		percent:     ptr.To[int64](0),
		burstable:   want(1024, unset, unset, 10*gi, unset),
		besteffort:  want(MinShares, unset, unset, 10*gi, unset),
	}, {
		name: "each class's reservation rounds down on its own",
		// 3*50/100 = 1 twice: 1000-1 = 999, 999-1 = 998 (not 1000-6*50/100 = 997).
		pods:        []*v1.Pod{guaranteed("g", "1", "3"), burstable("b", "1", "3")},
		allocatable: 1000,
		percent:     ptr.To[int64](50),
		burstable:   want(1024, unset, unset, 999, unset),
		besteffort:  want(MinShares, unset, unset, 998, unset),
	}, {
		name:       "allocatable memory unknown (0): no memory limits",
		pods:       []*v1.Pod{guaranteed("g", "1", "2Gi")},
		percent:    ptr.To[int64](100),
		burstable:  want(MinShares, unset, unset, unset, unset),
		besteffort: want(MinShares, unset, unset, unset, unset),
	}, {
		name:        "over-reserved: never below 0",
		pods:        []*v1.Pod{guaranteed("g", "1", "6Gi"), burstable("b", "1", "6Gi")},
		allocatable: 8 * gi,
		percent:     ptr.To[int64](100),
		burstable:   want(1024, unset, unset, 2*gi, unset),
		besteffort:  want(MinShares, unset, unset, 0, unset),
	}, {
		name: "pod requests count init containers and overhead",
		pods: []*v1.Pod{
			withInit(burstable("b", "500m", "1Gi"), ctr("init", res("cpu", "2", "memory", "3Gi"), nil)),
			func() *v1.Pod {
				p := guaranteed("g", "1", "1Gi")
				p.Spec.Overhead = res("cpu", "100m", "memory", "1Gi")
				return p
			}(),
		},
		allocatable: 8 * gi,
		percent:     ptr.To[int64](100),
		burstable:   want(2048, unset, unset, 6*gi, unset),
		besteffort:  want(MinShares, unset, unset, 3*gi, unset),
	}, {
		name:        "a pod that skipped defaulting is classed as the kubelet would",
		pods:        []*v1.Pod{podOf("d", ctr("c", nil, res("cpu", "1", "memory", "1Gi")))},
		allocatable: 8 * gi,
		percent:     ptr.To[int64](100),
		burstable:   want(MinShares, unset, unset, 7*gi, unset),
		besteffort:  want(MinShares, unset, unset, 7*gi, unset),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, be := QOSConfigs(tt.pods, tt.allocatable, tt.percent)
			if got := describe(b); got != tt.burstable {
				t.Errorf("burstable\ngot  %s\nwant %s", got, tt.burstable)
			}
			if got := describe(be); got != tt.besteffort {
				t.Errorf("besteffort\ngot  %s\nwant %s", got, tt.besteffort)
			}
		})
	}
}

func TestKubepodsConfig(t *testing.T) {
	tests := []struct {
		name        string
		allocatable v1.ResourceList
		enforce     bool
		want        string
	}{{
		name:        "enforced: shares, memory and pids from allocatable",
		allocatable: res("cpu", "3", "memory", "8Gi", "pods", "110", "pid", "30000"),
		enforce:     true,
		want:        want(3072, unset, unset, 8*gi, 30000),
	}, {
		name:        "enforced, fractional CPUs",
		allocatable: res("cpu", "1500m", "memory", "1Gi"),
		enforce:     true,
		want:        want(1536, unset, unset, gi, unset),
	}, {
		name:        "not enforced: shares only, memory and pids unlimited",
		allocatable: res("cpu", "3", "memory", "8Gi", "pid", "30000"),
		want:        want(3072, unset, unset, -1, -1),
	}, {
		name:        "no CPUs known: shares left alone",
		allocatable: res("memory", "8Gi"),
		enforce:     true,
		want:        want(unset, unset, unset, 8*gi, unset),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(KubepodsConfig(tt.allocatable, tt.enforce)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
