package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/server"
)

func TestDescribeNode(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	node := &v1.Node{}
	node.Name = "n1"
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeDiskPressure, Status: v1.ConditionTrue,
		Reason: "KubeletHasDiskPressure", Message: "kubelet has disk pressure", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
	node.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	ev := eviction.Status{
		LastSync: now.Add(-2 * time.Second),
		Thresholds: []eviction.ThresholdStatus{
			{Signal: "nodefs.available", Value: "10%", Quantity: "1Gi", Available: "512Mi", Capacity: "10Gi", Met: true, Enforced: true, MetSince: now.Add(-30 * time.Second)},
			{Signal: "memory.available", Value: "1Gi", GracePeriod: metav1.Duration{Duration: time.Minute}, Met: true, MetSince: now.Add(-10 * time.Second)},
			{Signal: "pid.available", Value: "5%"},
		},
		LastEviction: &eviction.Eviction{Namespace: "default", Name: "filler", Time: now.Add(-5 * time.Second), Message: "The node was low on resource: ephemeral-storage."},
	}
	out := describeNode(node, nil, ev, nil, now)
	for _, want := range []string{
		"Name:", "n1",
		"DiskPressure", "KubeletHasDiskPressure",
		"cpu:", "2",
		"nodefs.available", "10% (1Gi)", "512Mi", "met for 30s, evicting",
		"memory.available", "1m0s", "met for 10s, in grace period",
		"pid.available", "<unknown>", "not met",
		"default/filler, 5s ago: The node was low on resource: ephemeral-storage.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe node lacks %q:\n%s", want, out)
		}
	}
}

// nodePod is a pod in phase with one container of requests and limits,
// given as name, quantity pairs, created age before now.
func nodePod(namespace, name string, phase v1.PodPhase, age time.Duration, requests, limits []string) v1.Pod {
	list := func(pairs []string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i+1 < len(pairs); i += 2 {
			l[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
		return l
	}
	p := v1.Pod{}
	p.Namespace, p.Name = namespace, name
	p.CreationTimestamp = metav1.NewTime(nodeNow.Add(-age))
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}}}
	p.Status.Phase = phase
	return p
}

var nodeNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestWriteNodePods(t *testing.T) {
	node := &v1.Node{}
	node.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}
	node.Status.Allocatable = v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("2"),
		v1.ResourceMemory:           resource.MustParse("4Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		"hugepages-2Mi":             resource.MustParse("64Mi"),
		"example.com/gpu":           resource.MustParse("2"),
	}
	gpuAndPages := []string{"cpu", "500m", "memory", "512Mi", "example.com/gpu", "1", "hugepages-2Mi", "32Mi"}
	pods := []v1.Pod{
		nodePod("default", "web", v1.PodRunning, 2*time.Hour, gpuAndPages, gpuAndPages),
		nodePod("kube-system", "coredns", v1.PodRunning, 5*24*time.Hour, []string{"cpu", "100m", "memory", "70Mi"}, []string{"memory", "170Mi"}),
		// Waiting to start, it holds its share already.
		nodePod("default", "pending", v1.PodPending, 10*time.Second, []string{"cpu", "580m", "memory", "128Mi", "example.com/fpga", "1"}, []string{"example.com/fpga", "1"}),
		nodePod("default", "done", v1.PodSucceeded, time.Hour, []string{"cpu", "1"}, nil),
		nodePod("default", "crashed", v1.PodFailed, time.Hour, []string{"memory", "1Gi"}, nil),
	}
	tests := []struct {
		name string
		node *v1.Node
		pods []v1.Pod
		want string
	}{
		{name: "pods", node: node, pods: pods, want: `Non-terminated Pods:  (3 in total)
  Namespace           Name     CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------           ----     ------------  ----------  ---------------  -------------  ---
  default             pending  580m (29%)    0 (0%)      128Mi (3%)       0 (0%)         10s
  default             web      500m (25%)    500m (25%)  512Mi (12%)      512Mi (12%)    120m
  kube-system         coredns  100m (5%)     0 (0%)      70Mi (1%)        170Mi (4%)     5d
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests     Limits
  --------           --------     ------
  cpu                1180m (59%)  500m (25%)
  memory             710Mi (17%)  682Mi (16%)
  ephemeral-storage  0 (0%)       0 (0%)
  hugepages-2Mi      32Mi (50%)   32Mi (50%)
  example.com/fpga   1            1
  example.com/gpu    1 (50%)      1 (50%)
`},
		// Before allocatable is worked out, shares are of capacity; a
		// resource the node does not list has no share.
		{name: "no pods, capacity only", node: &v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}},
			want: `Non-terminated Pods:  (0 in total)
  Namespace           Name  CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------           ----  ------------  ----------  ---------------  -------------  ---
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests  Limits
  --------           --------  ------
  cpu                0 (0%)    0 (0%)
  memory             0         0
  ephemeral-storage  0         0
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			w := newDescribeWriter(&b)
			writeNodePods(w, tt.node, tt.pods, nodeNow)
			if got := b.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s\ndiff:\n%s", got, tt.want, lineDiff(got, tt.want))
			}
		})
	}
}

// TestDescribeNodeCommand runs describe node against a real local API: the
// pods' share of the node comes between allocatable and eviction.
func TestDescribeNodeCommand(t *testing.T) {
	src := &apiSource{
		pods: []v1.Pod{
			nodePod("default", "web", v1.PodRunning, time.Hour, []string{"cpu", "500m"}, nil),
			nodePod("default", "done", v1.PodSucceeded, time.Hour, []string{"cpu", "1"}, nil),
		},
		node: v1.Node{Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}},
	}
	src.node.Name = "n1"
	hs := httptest.NewServer(server.New("", src, nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)

	var out strings.Builder
	if err := describeNodeCmd(context.Background(), &out, newAPIClient(hs.URL), nodeNow, palette{}); err != nil {
		t.Fatal(err)
	}
	rest := out.String()
	for _, want := range []string{
		"Allocatable:\n", "Non-terminated Pods:  (1 in total)\n", "default", "web", "500m (25%)",
		"Allocated resources:\n", "cpu", "500m (25%)", "Eviction:\n", "Events:",
	} {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("%q missing (or out of order) in\n%s", want, out.String())
		}
		rest = rest[i+len(want):]
	}
	if strings.Contains(out.String(), "done") {
		t.Errorf("a terminated pod is listed:\n%s", out.String())
	}
}
