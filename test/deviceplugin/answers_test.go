package deviceplugin

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func TestCompareIDs(t *testing.T) {
	tests := []struct {
		a, b string
		want int // the sign
	}{
		{"widget-0", "widget-0", 0},
		{"widget-2", "widget-10", -1},
		{"widget-10", "widget-9", 1},
		{"widget-1", "widget-1a", -1},
		{"a", "b", -1},
		{"gpu-0", "widget-0", -1},
		{"widget-01", "widget-1", 1},
		{"widget-007", "widget-8", -1},
		{"", "widget-0", -1},
		{"1-b", "1-a", 1},
	}
	for _, tt := range tests {
		got := compareIDs(tt.a, tt.b)
		if sign(got) != tt.want {
			t.Errorf("compareIDs(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
		if back := compareIDs(tt.b, tt.a); sign(back) != -tt.want {
			t.Errorf("compareIDs(%q, %q) = %d, want sign %d", tt.b, tt.a, back, -tt.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestPreferredDevices(t *testing.T) {
	avail := []string{"widget-10", "widget-3", "widget-0", "widget-2", "widget-1"}
	tests := []struct {
		name        string
		available   []string
		mustInclude []string
		size        int
		want        []string
	}{
		{"lowest first", avail, nil, 2, []string{"widget-0", "widget-1"}},
		{"numeric order", []string{"widget-10", "widget-9", "widget-11"}, nil, 2, []string{"widget-9", "widget-10"}},
		{"must include kept", avail, []string{"widget-10"}, 2, []string{"widget-0", "widget-10"}},
		{"must include only", avail, []string{"widget-3", "widget-2"}, 2, []string{"widget-2", "widget-3"}},
		{"must include beyond size", avail, []string{"widget-3", "widget-2"}, 1, []string{"widget-2", "widget-3"}},
		{"must include repeated", avail, []string{"widget-3", "widget-3"}, 2, []string{"widget-0", "widget-3"}},
		{"not enough", []string{"widget-1"}, nil, 3, []string{"widget-1"}},
		{"size zero", avail, nil, 0, []string{}},
		{"all", avail, nil, 5, []string{"widget-0", "widget-1", "widget-2", "widget-3", "widget-10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.available)
			got := preferredDevices(tt.available, tt.mustInclude, tt.size)
			if !slices.Equal(got, tt.want) {
				t.Errorf("preferredDevices = %q, want %q", got, tt.want)
			}
			if !slices.Equal(tt.available, before) {
				t.Errorf("preferredDevices reordered its input: %q", tt.available)
			}
		})
	}
}

func TestContainerAllocation(t *testing.T) {
	mounts := map[string][]*pluginapi.Mount{
		"w1": {{ContainerPath: "/a", HostPath: "/srv/a"}, {ContainerPath: "/b", HostPath: "/srv/b", ReadOnly: true}},
	}
	tests := []struct {
		name string
		ids  []string
		want *pluginapi.ContainerAllocateResponse
	}{{
		name: "request order kept, mounts of configured devices only",
		ids:  []string{"w2", "w1"},
		want: &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{EnvDevices: "w2,w1"},
			Annotations: map[string]string{AnnotationDeviceIDs: "w2,w1"},
			Devices: []*pluginapi.DeviceSpec{
				{HostPath: "/dev/zero", ContainerPath: "/dev/w2", Permissions: "rw"},
				{HostPath: "/dev/zero", ContainerPath: "/dev/w1", Permissions: "rw"},
			},
			Mounts: []*pluginapi.Mount{{ContainerPath: "/a", HostPath: "/srv/a"}, {ContainerPath: "/b", HostPath: "/srv/b", ReadOnly: true}},
		},
	}, {
		name: "no devices",
		want: &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{EnvDevices: ""},
			Annotations: map[string]string{AnnotationDeviceIDs: ""},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := containerAllocation(tt.ids, "/dev/zero", mounts)
			if !proto.Equal(got, tt.want) {
				t.Errorf("containerAllocation = %v, want %v", got, tt.want)
			}
			if len(got.Mounts) > 0 && got.Mounts[0] == mounts["w1"][0] {
				t.Error("the answer shares the configured mounts")
			}
		})
	}
}

func TestDeviceList(t *testing.T) {
	devs := []Device{{ID: "w0", NUMA: []int64{1}}, {ID: "w1"}, {ID: "w1"}}
	got := deviceList(devs, map[string]bool{"w1": true, "gone": true})
	want := &pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{
		{ID: "w0", Health: pluginapi.Healthy, Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 1}}}},
		{ID: "w1", Health: pluginapi.Unhealthy},
		{ID: "w1", Health: pluginapi.Unhealthy}, // duplicates go out as given
	}}
	if !proto.Equal(got, want) {
		t.Errorf("deviceList = %v, want %v", got, want)
	}
}
