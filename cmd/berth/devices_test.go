package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
)

func TestDescribeDevices(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	gone := now.Add(-90 * time.Second)
	snap := devicemanager.Snapshot{
		Resources: []devicemanager.ResourceStatus{
			{Name: "example.com/widget", Capacity: 2, Allocatable: 1, Connected: true, Listed: true, Devices: []devicemanager.DeviceStatus{
				{ID: "w0", Health: "Healthy", NUMA: []int64{0, 1}}, {ID: "w1", Health: "Unhealthy"}}},
			{Name: "vendor.com/gpu", DisconnectedAt: &gone, Problem: "device plugin not connected", Devices: []devicemanager.DeviceStatus{}},
			{Name: "vendor.com/nic", Connected: true, Devices: []devicemanager.DeviceStatus{}},
		},
		Allocations: []devicemanager.Allocation{
			{PodNamespace: "default", PodName: "trainer", PodUID: "u1", Container: "app", Resource: "example.com/widget", DeviceIDs: []string{"w0"}},
			{PodUID: "u2", Container: "old", Resource: "example.com/widget", DeviceIDs: []string{"w1"}},
		},
	}
	events := deviceEvents([]v1.Event{
		{Type: "Warning", Reason: "DeviceCheckpointCorrupt", Message: "moved aside", Count: 1,
			FirstTimestamp: metav1.NewTime(now.Add(-time.Minute)), LastTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			Source: v1.EventSource{Component: "berth"}},
		{Type: "Normal", Reason: "Starting", Message: "not a device event"},
	})
	want := `RESOURCE            CAPACITY  ALLOCATABLE  ALLOCATED  PLUGIN
example.com/widget  2         1            2          connected
vendor.com/gpu      0         0            0          not connected for 90s
vendor.com/nic      0         0            0          connected, devices not listed yet

RESOURCE            DEVICE  HEALTH     NUMA
example.com/widget  w0      Healthy    0,1
example.com/widget  w1      Unhealthy  -

POD              CONTAINER  RESOURCE            DEVICES
default/trainer  app        example.com/widget  w0
uid u2           old        example.com/widget  w1

Events:
  Type     Reason                   Age   From   Message
  ----     ------                   ----  ----   -------
  Warning  DeviceCheckpointCorrupt  60s   berth  moved aside
`
	if got := describeDevices(snap, events, now); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := describeDevices(devicemanager.Snapshot{}, nil, now); got != "Resources:  <none>\n\nAllocations:  <none>\n\nEvents:  <none>\n" {
		t.Errorf("empty:\n%q", got)
	}
}
