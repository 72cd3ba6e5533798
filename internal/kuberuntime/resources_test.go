package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/cm"
)

const gi = int64(1) << 30

func TestContainerResources(t *testing.T) {
	tests := []struct {
		name               string
		r                  v1.ResourceRequirements
		shares, quota, mem int64
		oom                int64
		otherContainerIsBE bool
		capacity           int64
		wantErr            bool
	}{
		{name: "best effort", shares: 2, oom: 1000},
		{name: "guaranteed", r: reqs(res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi")),
			shares: 512, quota: 50000, mem: 256 << 20, oom: -997},
		{name: "guaranteed fractional cpu", r: reqs(res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")),
			shares: 1024, quota: 100000, mem: gi, oom: -997},
		{name: "burstable request only", r: reqs(res("cpu", "250m", "memory", "1Gi"), nil), capacity: 8 * gi,
			shares: 256, oom: 875},
		{name: "burstable limit only cpu uses limit for shares", r: reqs(nil, res("cpu", "2")), capacity: 8 * gi,
			shares: 2048, quota: 200000, oom: 999},
		{name: "burstable memory limit", r: reqs(res("memory", "2Gi"), res("memory", "4Gi")), capacity: 8 * gi,
			shares: 2, mem: 4 * gi, oom: 750},
		{name: "burstable tiny quota", r: reqs(res("cpu", "1m"), res("cpu", "5m")), capacity: 8 * gi,
			shares: 2, quota: 1000, oom: 999},
		{name: "burstable because another container is besteffort", otherContainerIsBE: true, capacity: 4 * gi,
			r:      reqs(res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")),
			shares: 1024, quota: 100000, mem: gi, oom: 750},
		{name: "burstable without capacity", r: reqs(res("memory", "1Gi"), nil), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			regular := []v1.ResourceRequirements{tt.r}
			if tt.otherContainerIsBE {
				regular = append(regular, v1.ResourceRequirements{})
			}
			pod := podWith(nil, regular)
			got, err := containerResources(pod, &pod.Spec.Containers[0], tt.capacity, cm.MemoryPolicy{})
			if tt.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.CpuShares != tt.shares || got.CpuQuota != tt.quota || got.CpuPeriod != 100000 ||
				got.MemoryLimitInBytes != tt.mem || got.OomScoreAdj != tt.oom {
				t.Errorf("got shares=%d quota=%d period=%d mem=%d oom=%d, want shares=%d quota=%d period=100000 mem=%d oom=%d",
					got.CpuShares, got.CpuQuota, got.CpuPeriod, got.MemoryLimitInBytes, got.OomScoreAdj,
					tt.shares, tt.quota, tt.mem, tt.oom)
			}
		})
	}
}

func TestOOMScoreAdjust(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	burst := func(mem string) v1.ResourceRequirements { return reqs(res("memory", mem), nil) }
	guaranteed := reqs(res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi"))
	prio := int32(2000001000)
	tests := []struct {
		name     string
		pod      func() *v1.Pod
		target   func(*v1.Pod) *v1.Container
		capacity int64
		want     int
	}{
		{
			name: "burstable 10% of memory", capacity: 10 * gi,
			pod: func() *v1.Pod { return podWith(nil, []v1.ResourceRequirements{burst("1Gi")}) }, want: 900,
		},
		{
			name: "burstable requesting everything is clamped to 3", capacity: 4 * gi,
			pod: func() *v1.Pod { return podWith(nil, []v1.ResourceRequirements{burst("4Gi")}) }, want: 3,
		},
		{
			name: "burstable requesting more than capacity is clamped to 3", capacity: 4 * gi,
			pod: func() *v1.Pod { return podWith(nil, []v1.ResourceRequirements{burst("16Gi")}) }, want: 3,
		},
		{
			name: "burstable without memory request is 999, not 1000", capacity: 4 * gi,
			pod: func() *v1.Pod { return podWith(nil, []v1.ResourceRequirements{reqs(res("cpu", "1"), nil)}) }, want: 999,
		},
		{
			name: "burstable rounding truncates toward zero", capacity: 3 * gi,
			pod: func() *v1.Pod { return podWith(nil, []v1.ResourceRequirements{burst("1Gi")}) }, want: 667,
		},
		{
			name: "guaranteed", pod: func() *v1.Pod { return podWith(nil, []v1.ResourceRequirements{guaranteed}) }, want: -997,
		},
		{
			name: "best effort", pod: func() *v1.Pod { return podWith(nil, []v1.ResourceRequirements{{}}) }, want: 1000,
		},
		{
			name: "static node-critical best effort pod", capacity: 4 * gi,
			pod: func() *v1.Pod {
				p := podWith(nil, []v1.ResourceRequirements{{}})
				p.Spec.PriorityClassName = "system-node-critical"
				p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
				return p
			},
			want: -997,
		},
		{
			name: "node-critical class but from the API server and low priority", capacity: 4 * gi,
			pod: func() *v1.Pod {
				p := podWith(nil, []v1.ResourceRequirements{{}})
				p.Spec.PriorityClassName = "system-node-critical"
				p.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
				return p
			},
			want: 1000,
		},
		{
			name: "node-critical by priority", capacity: 4 * gi,
			pod: func() *v1.Pod {
				p := podWith(nil, []v1.ResourceRequirements{burst("1Gi")})
				p.Spec.PriorityClassName = "system-node-critical"
				p.Spec.Priority = &prio
				return p
			},
			want: -997,
		},
		{
			name: "sidecar scores no higher than the smallest regular container", capacity: 10 * gi,
			pod: func() *v1.Pod {
				p := podWith([]v1.ResourceRequirements{burst("100Mi")}, []v1.ResourceRequirements{burst("2Gi"), burst("1Gi")})
				p.Spec.InitContainers[0].RestartPolicy = &always
				return p
			},
			target: func(p *v1.Pod) *v1.Container { return &p.Spec.InitContainers[0] },
			want:   900,
		},
		{
			name: "sidecar with a larger request keeps its own", capacity: 10 * gi,
			pod: func() *v1.Pod {
				p := podWith([]v1.ResourceRequirements{burst("5Gi")}, []v1.ResourceRequirements{burst("1Gi")})
				p.Spec.InitContainers[0].RestartPolicy = &always
				return p
			},
			target: func(p *v1.Pod) *v1.Container { return &p.Spec.InitContainers[0] },
			want:   500,
		},
		{
			name: "plain init container is not a sidecar", capacity: 10 * gi,
			pod: func() *v1.Pod {
				return podWith([]v1.ResourceRequirements{burst("100Mi")}, []v1.ResourceRequirements{burst("1Gi")})
			},
			target: func(p *v1.Pod) *v1.Container { return &p.Spec.InitContainers[0] },
			want:   991,
		},
		{
			name: "pod-level request shared among containers", capacity: 10 * gi,
			pod: func() *v1.Pod {
				p := podWith(nil, []v1.ResourceRequirements{burst("1Gi"), {}})
				p.Spec.Resources = &v1.ResourceRequirements{Requests: res("memory", "3Gi")}
				return p
			},
			// (3Gi - 1Gi) / 2 containers = 1Gi extra each: 1000 - 1000*2/10.
			want: 800,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod()
			c := &pod.Spec.Containers[0]
			if tt.target != nil {
				c = tt.target(pod)
			}
			got, err := OOMScoreAdjust(pod, c, tt.capacity)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("OOMScoreAdjust = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAggregateContainerMemoryRequest(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := podWith(
		[]v1.ResourceRequirements{reqs(res("memory", "1Gi"), nil), reqs(res("memory", "5Gi"), nil), reqs(res("memory", "2Gi"), nil)},
		[]v1.ResourceRequirements{reqs(res("memory", "1Gi"), nil)},
	)
	pod.Spec.InitContainers[0].RestartPolicy = &always // sidecar
	// Running: 1Gi (app) + 1Gi (sidecar) = 2Gi; peak during init: 1Gi sidecar + 5Gi = 6Gi.
	if got := aggregateContainerMemoryRequest(pod); got != 6*gi {
		t.Errorf("aggregate = %d, want %d", got, 6*gi)
	}
}
