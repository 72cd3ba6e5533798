package server

import (
	"encoding/json"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
)

func TestDevicesAndNodeEvents(t *testing.T) {
	snap := devicemanager.Snapshot{
		Resources: []devicemanager.ResourceStatus{{
			Name: "example.com/widget", Capacity: 2, Allocatable: 1, Connected: true, Endpoint: "/dp/widget.sock",
			Devices: []devicemanager.DeviceStatus{{ID: "w0", Health: "Healthy", NUMA: []int64{0}}, {ID: "w1", Health: "Unhealthy"}},
		}},
		Allocations: []devicemanager.Allocation{{PodNamespace: "default", PodName: "gpu", PodUID: "u1",
			Container: "app", Resource: "example.com/widget", DeviceIDs: []string{"w0"}}},
	}
	src := &fakeSource{devices: snap, nodeEvents: []v1.Event{{Reason: "DeviceCheckpointCorrupt", Message: "moved aside"}}}
	h := newTestServer(src).Handler()

	rec := get(t, h, "/devices")
	var got devicemanager.Snapshot
	if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != 200 || err != nil {
		t.Fatalf("/devices: %d %v", rec.Code, err)
	}
	if !reflect.DeepEqual(got, snap) {
		t.Errorf("/devices:\n got %+v\nwant %+v", got, snap)
	}

	rec = get(t, h, "/node/events")
	var list v1.EventList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); rec.Code != 200 || err != nil {
		t.Fatalf("/node/events: %d %v", rec.Code, err)
	}
	if list.Kind != "EventList" || len(list.Items) != 1 || list.Items[0].Reason != "DeviceCheckpointCorrupt" {
		t.Errorf("/node/events = %+v", list)
	}
	src.nodeEvents = nil
	if rec := get(t, h, "/node/events"); rec.Code != 200 || !json.Valid(rec.Body.Bytes()) {
		t.Errorf("no node events: %d %s", rec.Code, rec.Body)
	}
}
