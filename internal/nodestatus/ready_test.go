package nodestatus

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func runtimeStatus(runtimeReady, networkReady bool) *runtimeapi.RuntimeStatus {
	return &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: runtimeReady, Reason: "RuntimeDown", Message: "shim gone"},
		{Type: runtimeapi.NetworkReady, Status: networkReady, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
	}}
}

func fullCapacity() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"),
		v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
	}
}

func TestNotReady(t *testing.T) {
	tests := []struct {
		name string
		h    Health
		want string
	}{
		{name: "ready", h: Health{Runtime: runtimeStatus(true, true), Capacity: fullCapacity()}, want: ""},
		{name: "runtime down",
			h:    Health{RuntimeErr: errors.New("connection refused"), Capacity: fullCapacity()},
			want: "container runtime is down: connection refused"},
		{name: "runtime not ready",
			h:    Health{Runtime: runtimeStatus(false, true), Capacity: fullCapacity()},
			want: "container runtime not ready: RuntimeReady=false reason:RuntimeDown message:shim gone"},
		{name: "network not ready",
			h:    Health{Runtime: runtimeStatus(true, false), Capacity: fullCapacity()},
			want: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized"},
		{name: "no conditions at all",
			h: Health{Runtime: &runtimeapi.RuntimeStatus{}, Capacity: fullCapacity()},
			want: "container runtime not ready: RuntimeReady condition missing, " +
				"container runtime network not ready: NetworkReady condition missing"},
		{name: "PLEG, after the runtime, before the network",
			h: Health{Runtime: runtimeStatus(false, false), PLEG: errors.New("pleg was last seen active 3m1s ago"), Capacity: fullCapacity()},
			want: "container runtime not ready: RuntimeReady=false reason:RuntimeDown message:shim gone, " +
				"PLEG is not healthy: pleg was last seen active 3m1s ago, " +
				"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized"},
		{name: "missing capacity",
			h:    Health{Runtime: runtimeStatus(true, true), Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}},
			want: "missing node capacity for resources: memory, pods, ephemeral-storage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NotReady(tt.h); got != tt.want {
				t.Errorf("NotReady = %q\nwant       %q", got, tt.want)
			}
		})
	}
}

func TestReadyConditionTransitions(t *testing.T) {
	ready := ReadyCondition("", nil, t0)
	if ready.Status != v1.ConditionTrue || ready.Reason != "KubeletReady" || !ready.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("first = %+v", ready)
	}
	same := ReadyCondition("", &ready, t1)
	if !same.LastTransitionTime.Time.Equal(t0) || !same.LastHeartbeatTime.Time.Equal(t1) {
		t.Errorf("unchanged: transition %v heartbeat %v; want t0, t1", same.LastTransitionTime, same.LastHeartbeatTime)
	}
	down := ReadyCondition("container runtime is down: x", &same, t1)
	if down.Status != v1.ConditionFalse || down.Reason != "KubeletNotReady" || down.Message != "container runtime is down: x" ||
		!down.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("down = %+v", down)
	}
}

func TestNetworkNotReadyBerthReason(t *testing.T) {
	ready := &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true}}}
	notReady := &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Reason: "NetworkPluginNotReady", Message: "Network plugin returns error: cni plugin not initialized"}}}
	for _, tc := range []struct {
		name string
		h    Health
		want string
	}{
		{"all ready", Health{Runtime: ready}, ""},
		{"runtime's reason", Health{Runtime: notReady}, "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"},
		{"berth's reason wins", Health{Runtime: notReady, Network: "no CNI configuration file in /x (--cni-conf-dir)"},
			"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:no CNI configuration file in /x (--cni-conf-dir)"},
		{"berth's reason though the runtime is ready", Health{Runtime: ready, Network: "waiting"}, "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:waiting"},
		{"runtime down says only that", Health{RuntimeErr: errors.New("down"), Network: "waiting"}, ""},
	} {
		if got := NetworkNotReady(tc.h); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
