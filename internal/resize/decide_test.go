package resize

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/cm"
)

func res(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	set := func(l v1.ResourceList, name v1.ResourceName, q string) {
		if q != "" {
			l[name] = resource.MustParse(q)
		}
	}
	set(r.Requests, v1.ResourceCPU, cpuReq)
	set(r.Limits, v1.ResourceCPU, cpuLim)
	set(r.Requests, v1.ResourceMemory, memReq)
	set(r.Limits, v1.ResourceMemory, memLim)
	return r
}

func podWith(uid string, rs ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	p.UID = types.UID("uid-" + uid)
	p.Name = uid
	for i, r := range rs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+i)), Resources: r})
	}
	return p
}

func TestWithAllocation(t *testing.T) {
	pod := podWith("a", res("100m", "200m", "10Mi", "20Mi"), res("1", "", "", ""))
	same, changed := WithAllocation(pod, AllocationOf(pod))
	if changed || same != pod {
		t.Fatalf("the pod's own allocation changed it")
	}
	alloc := AllocationOf(pod)
	alloc["c0"] = res("50m", "50m", "10Mi", "20Mi")
	got, changed := WithAllocation(pod, alloc)
	if !changed || got.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 50 {
		t.Fatalf("WithAllocation = %v, %v", got.Spec.Containers[0].Resources, changed)
	}
	if pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 100 {
		t.Error("WithAllocation changed its input")
	}
}

func TestAdmit(t *testing.T) {
	node := Node{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("110")}}
	allocated := podWith("p", res("500m", "500m", "100Mi", "100Mi"))
	other := podWith("o", res("1", "", "500Mi", ""))
	guaranteedGrow := podWith("p", res("700m", "700m", "100Mi", "100Mi"))
	guaranteedGrow.UID = allocated.UID
	for _, tc := range []struct {
		name    string
		desired *v1.Pod
		others  []*v1.Pod
		node    Node
		want    Verdict
	}{
		{name: "fits", desired: guaranteedGrow, others: []*v1.Pod{other}, node: node, want: Verdict{Admit: true}},
		{name: "not beside the others: Deferred", desired: withCPU(allocated, "1500m"), others: []*v1.Pod{other}, node: node,
			want: Verdict{Reason: ReasonDeferred, Message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"}},
		{name: "more than allocatable: Deferred as in v1.36", desired: withCPU(allocated, "3"), node: node,
			want: Verdict{Reason: ReasonDeferred, Message: "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"}},
		{name: "its own old allocation does not count", desired: withCPU(allocated, "2"), others: []*v1.Pod{allocated}, node: node, want: Verdict{Admit: true}},
		{name: "static cpu manager, Guaranteed cpu resize", desired: guaranteedGrow, node: Node{Allocatable: node.Allocatable, StaticCPUManager: true},
			want: Verdict{Reason: ReasonInfeasible, Message: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`}},
		{name: "static memory manager, cpu only", desired: guaranteedGrow, node: Node{Allocatable: node.Allocatable, StaticMemoryManager: true},
			want: Verdict{Admit: true}},
		{name: "pod-level resources", desired: withPodLevel(allocated), node: node,
			want: Verdict{Reason: ReasonInfeasible, Message: "InPlacePodLevelResourcesVerticalScaling is disabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Admit(tc.desired, allocated, tc.others, tc.node); got != tc.want {
				t.Errorf("Admit = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func withCPU(p *v1.Pod, cpu string) *v1.Pod {
	out := p.DeepCopy()
	out.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
	out.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse(cpu)
	return out
}

func withPodLevel(p *v1.Pod) *v1.Pod {
	out := p.DeepCopy()
	r := res("1", "1", "", "")
	out.Spec.Resources = &r
	return out
}

func TestComputeActions(t *testing.T) {
	restartMem := []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	for _, tc := range []struct {
		name     string
		desired  []v1.ResourceRequirements
		policy   []v1.ContainerResizePolicy // of c1
		actuated Allocation
		want     Actions
	}{
		{name: "nothing to do", desired: []v1.ResourceRequirements{res("100m", "200m", "10", "20")},
			actuated: Allocation{"c0": res("100m", "200m", "10", "20")}, want: Actions{}},
		{name: "cpu limit up, memory limit down: one update each",
			desired:  []v1.ResourceRequirements{res("100m", "300m", "10", "15")},
			actuated: Allocation{"c0": res("100m", "200m", "10", "20")},
			want: Actions{Update: map[v1.ResourceName][]Update{
				v1.ResourceCPU:    {{Name: "c0", ID: "id0", Desired: Values{15, 10, 300, 100}, Current: Values{20, 10, 200, 100}}},
				v1.ResourceMemory: {{Name: "c0", ID: "id0", Desired: Values{15, 10, 300, 100}, Current: Values{20, 10, 200, 100}}},
			}}},
		{name: "decreases before increases",
			desired:  []v1.ResourceRequirements{res("300m", "", "", ""), res("100m", "", "", "")},
			actuated: Allocation{"c0": res("200m", "", "", ""), "c1": res("200m", "", "", "")},
			want: Actions{Update: map[v1.ResourceName][]Update{v1.ResourceCPU: {
				{Name: "c1", ID: "id1", Desired: Values{CPURequest: 100}, Current: Values{CPURequest: 200}},
				{Name: "c0", ID: "id0", Desired: Values{CPURequest: 300}, Current: Values{CPURequest: 200}},
			}}}},
		{name: "RestartContainer for memory restarts only that container",
			desired:  []v1.ResourceRequirements{res("300m", "", "", ""), res("", "", "20", "20")},
			policy:   restartMem,
			actuated: Allocation{"c0": res("200m", "", "", ""), "c1": res("", "", "10", "10")},
			want: Actions{
				Update:  map[v1.ResourceName][]Update{v1.ResourceCPU: {{Name: "c0", ID: "id0", Desired: Values{CPURequest: 300}, Current: Values{CPURequest: 200}}}},
				Restart: []Restart{{Name: "c1", ID: "id1", Index: 1, Message: "Container c1 resize requires restart"}},
			}},
		{name: "RestartContainer for memory, cpu changed: in place",
			desired:  []v1.ResourceRequirements{res("", "", "", ""), res("200m", "", "10", "10")},
			policy:   restartMem,
			actuated: Allocation{"c0": res("", "", "", ""), "c1": res("100m", "", "10", "10")},
			want:     Actions{Update: map[v1.ResourceName][]Update{v1.ResourceCPU: {{Name: "c1", ID: "id1", Desired: Values{10, 10, 0, 200}, Current: Values{10, 10, 0, 100}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podWith("p", tc.desired...)
			var running []Running
			for i := range pod.Spec.Containers {
				running = append(running, Running{Name: pod.Spec.Containers[i].Name, ID: "id" + string(rune('0'+i)), Index: i})
			}
			if len(pod.Spec.Containers) > 1 {
				pod.Spec.Containers[1].ResizePolicy = tc.policy
			}
			got := ComputeActions(pod, tc.actuated, running)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ComputeActions =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	cpu := map[v1.ResourceName][]Update{v1.ResourceCPU: {{Name: "c0"}}}
	mem := map[v1.ResourceName][]Update{v1.ResourceMemory: {{Name: "c0"}}}
	both := map[v1.ResourceName][]Update{v1.ResourceCPU: {{Name: "c0"}}, v1.ResourceMemory: {{Name: "c0"}}}
	cfg := func(shares uint64, quota, memory int64) cm.ResourceConfig {
		return cm.ResourceConfig{CPUShares: ptr.To(shares), CPUQuota: ptr.To(quota), CPUPeriod: ptr.To(uint64(100000)), Memory: ptr.To(memory)}
	}
	for _, tc := range []struct {
		name      string
		update    map[v1.ResourceName][]Update
		cur, next cm.ResourceConfig
		restart   bool
		want      string
	}{
		{name: "cpu grows: pod first", update: cpu, cur: cfg(102, 20000, 1), next: cfg(512, 50000, 1),
			want: "cpu/PodLimit cpu/PodRequest cpu/Containers"},
		{name: "cpu shrinks: pod last, request before limit", update: cpu, cur: cfg(512, 50000, 1), next: cfg(102, 20000, 1),
			want: "cpu/Containers cpu/PodRequest cpu/PodLimit"},
		{name: "memory grows", update: mem, cur: cfg(2, 1, 100), next: cfg(2, 1, 200), want: "memory/PodLimit memory/Containers"},
		{name: "memory shrinks", update: mem, cur: cfg(2, 1, 200), next: cfg(2, 1, 100), want: "memory/Containers memory/PodLimit"},
		{name: "memory before cpu", update: both, cur: cfg(2, 1, 200), next: cfg(4, 2, 100),
			want: "memory/Containers memory/PodLimit cpu/PodLimit cpu/PodRequest cpu/Containers"},
		{name: "no pod limit: kept", update: mem, cur: cfg(2, 1, 200), next: cm.ResourceConfig{CPUShares: ptr.To(uint64(2))}, want: "memory/Containers"},
		{name: "a restart alone still resizes the pod cgroup", cur: cfg(2, 1, 100), next: cfg(2, 1, 200), restart: true,
			want: "memory/PodLimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range Order(Actions{Update: tc.update}, tc.cur, tc.next, tc.restart) {
				got = append(got, s.String())
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("Order = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestValidateMemory(t *testing.T) {
	down := Actions{Update: map[v1.ResourceName][]Update{v1.ResourceMemory: {{Name: "c0", Desired: Values{MemoryLimit: 100}, Current: Values{MemoryLimit: 200}}}}}
	cur, next := cm.ResourceConfig{Memory: ptr.To(int64(300))}, cm.ResourceConfig{Memory: ptr.To(int64(200))}
	for _, tc := range []struct {
		name  string
		usage Usage
		want  string
	}{
		{name: "below usage", usage: Usage{Pod: ptr.To(int64(150)), Containers: map[string]int64{"c0": 150}},
			want: `cannot decrease memory limits: attempting to set container "c0" memory limit (100) below current usage (150)`},
		{name: "pod below usage", usage: Usage{Pod: ptr.To(int64(250)), Containers: map[string]int64{"c0": 50}},
			want: "cannot decrease memory limits: attempting to set pod memory limit (200) below current usage (250)"},
		{name: "fits", usage: Usage{Pod: ptr.To(int64(150)), Containers: map[string]int64{"c0": 50}}},
		{name: "unknown usage", usage: Usage{Containers: map[string]int64{}},
			want: `cannot decrease memory limits: [missing pod memory usage, missing container "c0" memory usage]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateMemory(down, cur, next, false, tc.usage)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("ValidateMemory = %q, want %q", got, tc.want)
			}
		})
	}
}
