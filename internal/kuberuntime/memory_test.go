package kuberuntime

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/cm"
)

// The node of the kubelet's TestGenerateLinuxContainerResourcesWithSwap:
// 40Gi of memory, 5Gi of swap.
const (
	testMemory = int64(40) << 30
	testSwap   = int64(5) << 30
)

func memPod(request, limit string) *v1.Pod {
	c := v1.Container{Name: "c1"}
	if request != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(request)}
	}
	if limit != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(limit)}
	}
	return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

func policy(v2, controller bool, behavior string, single bool) cm.MemoryPolicy {
	return cm.MemoryPolicy{
		MemoryHost:   cm.MemoryHost{CgroupV2: v2, SwapController: controller, MemoryCapacity: testMemory, SwapCapacity: testSwap},
		SwapBehavior: behavior, SingleProcessOOMKill: single,
	}
}

// The cases of the kubelet's TestGetContainerSwapBehavior.
func TestContainerSwapBehavior(t *testing.T) {
	critical := memPod("1Gi", "2Gi")
	prio := int32(2000000000)
	critical.Spec.Priority = &prio
	static := memPod("1Gi", "2Gi")
	static.Annotations = map[string]string{configSourceAnnotation: "file"}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		p    cm.MemoryPolicy
		want string
	}{
		{"NoSwap configured", memPod("1Gi", "2Gi"), policy(true, true, cm.NoSwap, false), cm.NoSwap},
		{"no swap controller", memPod("1Gi", "2Gi"), policy(true, false, cm.LimitedSwap, false), cm.NoSwap},
		{"cgroup v1", memPod("1Gi", "2Gi"), policy(false, true, cm.LimitedSwap, true), cm.NoSwap},
		{"BestEffort", memPod("", ""), policy(true, true, cm.LimitedSwap, false), cm.NoSwap},
		{"Guaranteed", memPod("1Gi", "1Gi"), policy(true, true, cm.LimitedSwap, false), cm.NoSwap},
		{"zero memory", memPod("0", "0"), policy(true, true, cm.LimitedSwap, false), cm.NoSwap},
		{"critical priority", critical, policy(true, true, cm.LimitedSwap, false), cm.NoSwap},
		{"static pod", static, policy(true, true, cm.LimitedSwap, false), cm.NoSwap},
		{"Burstable, request below limit", memPod("1Gi", "2Gi"), policy(true, true, cm.LimitedSwap, false), cm.LimitedSwap},
		{"Burstable, request only", memPod("1Gi", ""), policy(true, true, cm.LimitedSwap, false), cm.LimitedSwap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := containerSwapBehavior(tc.pod, &tc.pod.Spec.Containers[0], tc.p); got != tc.want {
				t.Errorf("containerSwapBehavior = %s, want %s", got, tc.want)
			}
		})
	}
}

// What reaches the CRI: memory.oom.group, memory.swap.max (v2) and
// memory_swap_limit_in_bytes (v1), as the kubelet's
// calculateLinuxResources and configureContainerSwapResources set them.
func TestContainerResourcesMemoryPolicy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		p           cm.MemoryPolicy
		wantUnified map[string]string
		wantSwap    int64
	}{
		{"v1 NoSwap with memsw: swap limit = memory limit", memPod("64Mi", "64Mi"), policy(false, true, cm.NoSwap, true), nil, 64 << 20},
		{"v1 NoSwap, no limit: 0, which the runtime ignores", memPod("", ""), policy(false, true, cm.NoSwap, true), nil, 0},
		{"v1 without memsw: nothing", memPod("64Mi", "64Mi"), policy(false, false, cm.NoSwap, true), nil, 0},
		{"v2 default: oom group and no swap", memPod("", ""), policy(true, true, cm.NoSwap, false),
			map[string]string{"memory.oom.group": "1", "memory.swap.max": "0"}, 0},
		{"v2 singleProcessOOMKill", memPod("", ""), policy(true, true, cm.NoSwap, true),
			map[string]string{"memory.swap.max": "0"}, 0},
		{"v2 without swap controller", memPod("", ""), policy(true, false, cm.NoSwap, false),
			map[string]string{"memory.oom.group": "1"}, 0},
		// 1Gi of 40Gi is 1/40 of 5Gi of swap: 128Mi.
		{"v2 LimitedSwap Burstable 1Gi", memPod("1Gi", "2Gi"), policy(true, true, cm.LimitedSwap, false),
			map[string]string{"memory.oom.group": "1", "memory.swap.max": "134217728"}, 0},
		{"v2 LimitedSwap Guaranteed", memPod("1Gi", "1Gi"), policy(true, true, cm.LimitedSwap, false),
			map[string]string{"memory.oom.group": "1", "memory.swap.max": "0"}, 0},
		{"v2 LimitedSwap request over capacity: no swap", memPod("41Gi", "42Gi"), policy(true, true, cm.LimitedSwap, false),
			map[string]string{"memory.oom.group": "1", "memory.swap.max": "0"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := containerResources(tc.pod, &tc.pod.Spec.Containers[0], testMemory, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Unified, tc.wantUnified) {
				t.Errorf("Unified = %v, want %v", r.Unified, tc.wantUnified)
			}
			if r.MemorySwapLimitInBytes != tc.wantSwap {
				t.Errorf("MemorySwapLimitInBytes = %d, want %d", r.MemorySwapLimitInBytes, tc.wantSwap)
			}
		})
	}
}

// The kubelet's GetHugepageLimitsFromResources: every host page size gets
// a limit, 0 unless the container (or, failing it, the pod) sets one.
func TestHugepageLimits(t *testing.T) {
	sizes := []int64{1 << 30, 2 << 20}
	limits := func(l v1.ResourceList) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Limits: l}}}}}
	}
	podLevel := limits(v1.ResourceList{"hugepages-1Gi": resource.MustParse("1Gi")})
	podLevel.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{
		"hugepages-2Mi": resource.MustParse("4Mi"), "hugepages-1Gi": resource.MustParse("2Gi")}}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		sizes []int64
		want  []*runtimeapi.HugepageLimit
	}{
		{"no huge pages on the host", limits(nil), nil, nil},
		{"none asked", limits(nil), sizes, []*runtimeapi.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB"}}},
		{"2Mi asked", limits(v1.ResourceList{"hugepages-2Mi": resource.MustParse("6Mi"), v1.ResourceMemory: resource.MustParse("1Gi")}), sizes,
			[]*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 6 << 20}, {PageSize: "1GB"}}},
		{"a size the host lacks is left out", limits(v1.ResourceList{"hugepages-16Gi": resource.MustParse("16Gi")}), sizes,
			[]*runtimeapi.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB"}}},
		{"pod level fills in, container wins", podLevel, sizes,
			[]*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 4 << 20}, {PageSize: "1GB", Limit: 1 << 30}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hugepageLimits(tc.pod, &tc.pod.Spec.Containers[0], tc.sizes)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("hugepageLimits = %v, want %v", got, tc.want)
			}
		})
	}
}
