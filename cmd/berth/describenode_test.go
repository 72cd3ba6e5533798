package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/eviction"
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
	out := describeNode(node, ev, nil, now)
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
