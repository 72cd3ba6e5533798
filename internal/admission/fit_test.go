package admission

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A node of 2 cpus, 4Gi of memory, 10Gi of scratch, 8Mi of 2Mi hugepages
// and 2 GPUs.
var fitNode = []string{
	"pods", "110", "cpu", "2", "memory", "4Gi", "ephemeral-storage", "10Gi",
	"hugepages-2Mi", "8Mi", "example.com/gpu", "2",
}

func TestFit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allocatable []string // fitNode when nil
		active      []*v1.Pod
		pod         *v1.Pod
		want        []InsufficientResource
	}{
		{
			name: "BestEffort pod on an empty node",
			pod:  newPod("p"),
		},
		{
			name:        "no pod slot left under maxPods",
			allocatable: []string{"pods", "2", "cpu", "2"},
			active:      []*v1.Pod{newPod("a"), newPod("b")},
			pod:         newPod("p"),
			want:        []InsufficientResource{{Resource: "pods", Requested: 1, Used: 2, Capacity: 2}},
		},
		{
			name:   "cpu in millicores",
			active: []*v1.Pod{newPod("a", burstable("1", "")), newPod("b", guaranteed("500m", "1Gi"))},
			pod:    newPod("p", burstable("2", "")),
			want:   []InsufficientResource{{Resource: "cpu", Requested: 2000, Used: 1500, Capacity: 2000}},
		},
		{
			name:   "cpu filling the node exactly fits",
			active: []*v1.Pod{newPod("a", burstable("1500m", ""))},
			pod:    newPod("p", burstable("500m", "")),
		},
		{
			name:   "memory in bytes",
			active: []*v1.Pod{newPod("a", burstable("", "3Gi"))},
			pod:    newPod("p", burstable("", "2Gi")),
			want:   []InsufficientResource{{Resource: "memory", Requested: 2 * gi, Used: 3 * gi, Capacity: 4 * gi}},
		},
		{
			name:   "ephemeral-storage",
			active: []*v1.Pod{newPod("a", requests("ephemeral-storage", "8Gi"))},
			pod:    newPod("p", requests("ephemeral-storage", "4Gi")),
			want:   []InsufficientResource{{Resource: "ephemeral-storage", Requested: 4 * gi, Used: 8 * gi, Capacity: 10 * gi}},
		},
		{
			name:   "hugepages",
			active: []*v1.Pod{newPod("a", requests("hugepages-2Mi", "4Mi"))},
			pod:    newPod("p", requests("hugepages-2Mi", "6Mi")),
			want:   []InsufficientResource{{Resource: "hugepages-2Mi", Requested: 6 * mi, Used: 4 * mi, Capacity: 8 * mi}},
		},
		{
			name: "hugepages of a size the node does not have",
			pod:  newPod("p", requests("hugepages-1Gi", "1Gi")),
			want: []InsufficientResource{{Resource: "hugepages-1Gi", Requested: gi}},
		},
		{
			name:   "extended resource the node lists",
			active: []*v1.Pod{newPod("a", requests("example.com/gpu", "1"))},
			pod:    newPod("p", requests("example.com/gpu", "2")),
			want:   []InsufficientResource{{Resource: "example.com/gpu", Requested: 2, Used: 1, Capacity: 2}},
		},
		{
			name:   "extended resource the node does not list is left to device admission",
			active: []*v1.Pod{newPod("a", requests("example.com/fpga", "1"))},
			pod:    newPod("p", requests("example.com/fpga", "4")),
		},
		{
			name: "a device class's implicit extended resource the scheduler gave through DRA is not the node's",
			pod: newPod("p", requests("deviceclass.resource.kubernetes.io/gpu-class", "2", "example.com/gpu", "3"),
				draBacked("c", "deviceclass.resource.kubernetes.io/gpu-class", "example.com/gpu")),
		},
		{
			name: "an implicit extended resource without DRA's mapping does not fit in nothing",
			pod:  newPod("p", requests("deviceclass.resource.kubernetes.io/gpu-class", "2"), draBacked("other", "deviceclass.resource.kubernetes.io/gpu-class")),
			want: []InsufficientResource{{Resource: "deviceclass.resource.kubernetes.io/gpu-class", Requested: 2}},
		},
		{
			name:   "the largest init container beats the sum of the app containers",
			active: []*v1.Pod{newPod("a", burstable("1500m", ""))},
			pod:    newPod("p", burstable("300m", ""), container("cpu", "200m"), initContainer("cpu", "800m"), initContainer("cpu", "100m")),
			want:   []InsufficientResource{{Resource: "cpu", Requested: 800, Used: 1500, Capacity: 2000}},
		},
		{
			name:   "the sum of the app containers beats a smaller init container",
			active: []*v1.Pod{newPod("a", burstable("1500m", ""))},
			pod:    newPod("p", burstable("300m", ""), container("cpu", "300m"), initContainer("cpu", "500m")),
			want:   []InsufficientResource{{Resource: "cpu", Requested: 600, Used: 1500, Capacity: 2000}},
		},
		{
			name:   "overhead counts for the pod and for the active pods",
			active: []*v1.Pod{newPod("a", burstable("1", ""), overhead("cpu", "500m"))},
			pod:    newPod("p", burstable("400m", ""), overhead("cpu", "200m")),
			want:   []InsufficientResource{{Resource: "cpu", Requested: 600, Used: 1500, Capacity: 2000}},
		},
		{
			name:   "zero requests on a full node are never insufficient",
			active: []*v1.Pod{newPod("a", requests("cpu", "2", "memory", "4Gi", "example.com/gpu", "2"))},
			pod:    newPod("p", requests("cpu", "0", "memory", "0", "example.com/gpu", "0", "hugepages-1Gi", "0")),
		},
		{
			name:        "every reason at once, in the scheduler's order",
			allocatable: []string{"pods", "1", "cpu", "0", "example.com/gpu", "0", "example.com/a", "0"},
			active:      []*v1.Pod{newPod("a")},
			pod: newPod("p", requests("hugepages-2Mi", "2Mi", "example.com/gpu", "1", "ephemeral-storage", "1",
				"memory", "1", "example.com/a", "1", "cpu", "1m")),
			want: []InsufficientResource{
				{Resource: "pods", Requested: 1, Used: 1, Capacity: 1},
				{Resource: "cpu", Requested: 1},
				{Resource: "memory", Requested: 1},
				{Resource: "ephemeral-storage", Requested: 1},
				{Resource: "example.com/a", Requested: 1},
				{Resource: "example.com/gpu", Requested: 1},
				{Resource: "hugepages-2Mi", Requested: 2 * mi},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc := tc.allocatable
			if alloc == nil {
				alloc = fitNode
			}
			allocatable := amounts(res(alloc...))
			pod, active := NewPodInfo(tc.pod), infos(tc.active...)
			// Requests are maps: the order must not depend on iteration.
			for range 20 {
				if got := fit(pod, allocatable, active); !slices.Equal(got, tc.want) {
					t.Fatalf("fit =\n%+v\nwant\n%+v", got, tc.want)
				}
			}
		})
	}
}

func TestInsufficientResource(t *testing.T) {
	for _, tc := range []struct {
		r               InsufficientResource
		message, reason string
		shortfall       int64
	}{
		{
			r:         InsufficientResource{Resource: "cpu", Requested: 2000, Used: 1500, Capacity: 2000},
			message:   "Node didn't have enough resource: cpu, requested: 2000, used: 1500, capacity: 2000",
			reason:    "OutOfcpu",
			shortfall: 1500,
		},
		{
			r:         InsufficientResource{Resource: "memory", Requested: 2 * gi, Used: 3 * gi, Capacity: 4 * gi},
			message:   "Node didn't have enough resource: memory, requested: 2147483648, used: 3221225472, capacity: 4294967296",
			reason:    "OutOfmemory",
			shortfall: gi,
		},
		{
			r:         InsufficientResource{Resource: "pods", Requested: 1, Used: 110, Capacity: 110},
			message:   "Node didn't have enough resource: pods, requested: 1, used: 110, capacity: 110",
			reason:    "OutOfpods",
			shortfall: 1,
		},
		{
			r:         InsufficientResource{Resource: "example.com/gpu", Requested: 2, Used: 1, Capacity: 2},
			message:   "Node didn't have enough resource: example.com/gpu, requested: 2, used: 1, capacity: 2",
			reason:    "OutOfexample.com/gpu",
			shortfall: 1,
		},
	} {
		if got := tc.r.Error(); got != tc.message {
			t.Errorf("Error() = %q, want %q", got, tc.message)
		}
		if got := tc.r.Reason(); got != tc.reason {
			t.Errorf("Reason() = %q, want %q", got, tc.reason)
		}
		if got := tc.r.Shortfall(); got != tc.shortfall {
			t.Errorf("%s: Shortfall() = %d, want %d", tc.r.Resource, got, tc.shortfall)
		}
	}
}
