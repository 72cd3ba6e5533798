package cm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

func TestPodResourceConfig(t *testing.T) {
	const mi = int64(1) << 20
	tests := []struct {
		name string
		pod  *v1.Pod
		pids int64
		want string
	}{{
		name: "guaranteed",
		pod:  podOf("g", ctr("a", res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi"))),
		want: want(512, 50000, QuotaPeriod, 256*mi, unset),
	}, {
		name: "guaranteed, two containers: sums",
		pod: podOf("g2",
			ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")),
			ctr("b", res("cpu", "250m", "memory", "512Mi"), res("cpu", "250m", "memory", "512Mi"))),
		want: want(1280, 125000, QuotaPeriod, gi+512*mi, unset),
	}, {
		name: "burstable, every container limited: sums of requests and limits",
		pod: podOf("b",
			ctr("a", res("cpu", "100m", "memory", "100Mi"), res("cpu", "1", "memory", "1Gi")),
			ctr("b", res("cpu", "200m", "memory", "200Mi"), res("cpu", "500m", "memory", "512Mi"))),
		want: want(307, 150000, QuotaPeriod, gi+512*mi, unset),
	}, {
		name: "burstable, one container without a cpu limit: no pod quota",
		pod: podOf("b",
			ctr("a", res("cpu", "100m", "memory", "100Mi"), res("cpu", "1", "memory", "1Gi")),
			ctr("b", res("cpu", "200m", "memory", "200Mi"), res("memory", "512Mi"))),
		want: want(307, unset, unset, gi+512*mi, unset),
	}, {
		name: "burstable, one container without a memory limit: no pod memory limit",
		pod: podOf("b",
			ctr("a", res("cpu", "100m", "memory", "100Mi"), res("cpu", "1", "memory", "1Gi")),
			ctr("b", res("cpu", "200m", "memory", "200Mi"), res("cpu", "1"))),
		want: want(307, 200000, QuotaPeriod, unset, unset),
	}, {
		name: "burstable, one container with nothing at all: neither",
		pod: podOf("b",
			ctr("a", res("cpu", "100m"), res("cpu", "1", "memory", "1Gi")),
			ctr("b", nil, nil)),
		want: want(102, unset, unset, unset, unset),
	}, {
		name: "burstable, requests only",
		pod:  podOf("b", ctr("a", res("cpu", "1500m", "memory", "1Gi"), nil)),
		want: want(1536, unset, unset, unset, unset),
	}, {
		name: "a limit under 10m still gets the kernel's minimum quota",
		pod:  podOf("b", ctr("a", res("cpu", "5m"), res("cpu", "5m"))),
		want: want(5, 1000, QuotaPeriod, unset, unset),
	}, {
		name: "init container larger than the app containers' sum wins",
		pod: withInit(podOf("i",
			ctr("a", res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi")),
			ctr("b", res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi"))),
			ctr("init", res("cpu", "2", "memory", "1Gi"), res("cpu", "2", "memory", "1Gi"))),
		want: want(2048, 200000, QuotaPeriod, gi, unset),
	}, {
		name: "init container smaller than the sum: the sum",
		pod: withInit(podOf("i",
			ctr("a", res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi")),
			ctr("b", res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi"))),
			ctr("init", res("cpu", "300m", "memory", "100Mi"), res("cpu", "300m", "memory", "100Mi"))),
		want: want(1024, 100000, QuotaPeriod, 512*mi, unset),
	}, {
		name: "per resource: the init container's cpu, the app containers' memory",
		pod: withInit(podOf("i",
			ctr("a", res("cpu", "500m", "memory", "1Gi"), res("cpu", "500m", "memory", "1Gi"))),
			ctr("init", res("cpu", "1", "memory", "100Mi"), res("cpu", "1", "memory", "100Mi"))),
		want: want(1024, 100000, QuotaPeriod, gi, unset),
	}, {
		name: "an init container without a limit unlimits the pod",
		pod: withInit(podOf("i",
			ctr("a", res("cpu", "500m", "memory", "256Mi"), res("cpu", "1", "memory", "512Mi"))),
			ctr("init", res("cpu", "100m"), nil)),
		want: want(512, unset, unset, unset, unset),
	}, {
		name: "a sidecar runs beside the app containers and the init containers after it",
		pod: withInit(podOf("s",
			ctr("a", res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi"))),
			sidecar("proxy", res("cpu", "250m", "memory", "64Mi"), res("cpu", "250m", "memory", "64Mi")),
			ctr("migrate", res("cpu", "1", "memory", "128Mi"), res("cpu", "1", "memory", "128Mi"))),
		// cpu: max(500+250, 250+1000) = 1250m; memory: max(256+64, 64+128) = 320Mi.
		want: want(1280, 125000, QuotaPeriod, 320*mi, unset),
	}, {
		name: "pod overhead is added to requests and to limits",
		pod: func() *v1.Pod {
			p := podOf("o", ctr("a", res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")))
			p.Spec.Overhead = res("cpu", "100m", "memory", "64Mi")
			return p
		}(),
		want: want(1126, 110000, QuotaPeriod, gi+64*mi, unset),
	}, {
		name: "pod-level resources decide, and a pod-level limit limits the pod",
		pod: func() *v1.Pod {
			p := podOf("pl", ctr("a", nil, nil), ctr("b", res("cpu", "100m"), nil))
			p.Spec.Resources = &v1.ResourceRequirements{
				Requests: res("cpu", "1", "memory", "512Mi"),
				Limits:   res("cpu", "2", "memory", "1Gi"),
			}
			return p
		}(),
		want: want(1024, 200000, QuotaPeriod, gi, unset),
	}, {
		name: "a pod that skipped defaulting: limits stand in for requests, so it is Guaranteed",
		pod:  podOf("d", ctr("a", nil, res("cpu", "1", "memory", "1Gi"))),
		want: want(1024, 100000, QuotaPeriod, gi, unset),
	}, {
		name: "besteffort: cpu.shares = 2 only",
		pod:  podOf("be", ctr("a", nil, nil), ctr("b", nil, nil)),
		want: want(MinShares, unset, unset, unset, unset),
	}, {
		name: "besteffort with a pids limit",
		pod:  podOf("be", ctr("a", nil, nil)),
		pids: 1024,
		want: want(MinShares, unset, unset, unset, 1024),
	}, {
		name: "burstable with a pids limit",
		pod:  podOf("b", ctr("a", res("cpu", "1"), nil)),
		pids: 4096,
		want: want(1024, unset, unset, unset, 4096),
	}, {
		name: "pids -1 (unlimited) leaves pids.max alone",
		pod:  podOf("b", ctr("a", res("cpu", "1"), nil)),
		pids: -1,
		want: want(1024, unset, unset, unset, unset),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			if got := describe(PodResourceConfig(tt.pod, tt.pids)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !equality.Semantic.DeepEqual(before, tt.pod) {
				t.Error("PodResourceConfig modified the pod")
			}
		})
	}
}
