package devicemanager

import (
	"reflect"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
)

func TestDeviceRunContainerOptions(t *testing.T) {
	gpu := &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"VISIBLE": "0,1", "SHARED": "same", "CLASH": "gpu"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/lib/gpu", HostPath: "/usr/lib/gpu", ReadOnly: true}, {ContainerPath: "/opt", HostPath: "/opt/gpu"}},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/gpu0", HostPath: "/dev/nvidia0", Permissions: "rw"}, {ContainerPath: "/dev/ctl", HostPath: "/dev/nvidiactl", Permissions: "rw"}},
		Annotations: map[string]string{"gpu": "yes", "a": "1"},
		CdiDevices:  []*pluginapi.CDIDevice{{Name: "vendor.com/gpu=0"}, {Name: "vendor.com/common=all"}},
	}
	nic := &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"SHARED": "same", "CLASH": "nic", "NIC": "eth1"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/opt", HostPath: "/opt/nic"}},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/ctl", HostPath: "/dev/nvidiactl", Permissions: "rw"}, {ContainerPath: "/dev/infiniband", HostPath: "/dev/infiniband", Permissions: "rwm"}},
		Annotations: map[string]string{"a": "2"},
		CdiDevices:  []*pluginapi.CDIDevice{{Name: "vendor.com/common=all"}},
	}
	pdev := podDevices{}
	pdev.insert("pod", "c", "example.com/gpu", checkpoint.DevicesPerNUMA{0: {"0", "1"}}, gpu)
	pdev.insert("pod", "c", "example.com/nic", checkpoint.DevicesPerNUMA{-1: {"eth1"}}, nic)

	opts, conflicts := pdev.deviceRunContainerOptions("pod", "c")
	kv := func(k, v string) *runtimeapi.KeyValue { return &runtimeapi.KeyValue{Key: k, Value: []byte(v)} }
	want := &DeviceRunContainerOptions{
		// example.com/gpu before example.com/nic; keys in order within each.
		Envs: []*runtimeapi.KeyValue{kv("CLASH", "gpu"), kv("SHARED", "same"), kv("VISIBLE", "0,1"), kv("NIC", "eth1")},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/lib/gpu", HostPath: "/usr/lib/gpu", Readonly: true},
			{ContainerPath: "/opt", HostPath: "/opt/gpu"},
		},
		Devices: []*runtimeapi.Device{
			{ContainerPath: "/dev/gpu0", HostPath: "/dev/nvidia0", Permissions: "rw"},
			{ContainerPath: "/dev/ctl", HostPath: "/dev/nvidiactl", Permissions: "rw"},
			{ContainerPath: "/dev/infiniband", HostPath: "/dev/infiniband", Permissions: "rwm"},
		},
		Annotations: map[string]string{"a": "1", "gpu": "yes"},
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "vendor.com/gpu=0"}, {Name: "vendor.com/common=all"}},
		DeviceIDs:   map[string][]string{"example.com/gpu": {"0", "1"}, "example.com/nic": {"eth1"}},
	}
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("options:\n got %v\nwant %v", opts, want)
	}
	wantConflicts := []string{"environment variable CLASH", "mount /opt", "annotation a"}
	if len(conflicts) != len(wantConflicts) {
		t.Fatalf("conflicts = %q, want %d", conflicts, len(wantConflicts))
	}
	for i, w := range wantConflicts {
		if !strings.Contains(conflicts[i], "resource example.com/nic: "+w) {
			t.Errorf("conflict %d = %q, want it to name %q", i, conflicts[i], w)
		}
	}

	if got, want := opts.AnnotationValue(), `{"example.com/gpu":["0","1"],"example.com/nic":["eth1"]}`; got != want {
		t.Errorf("annotation value = %s, want %s", got, want)
	}

	if opts, _ := pdev.deviceRunContainerOptions("pod", "other"); opts != nil {
		t.Errorf("a container without devices got %v", opts)
	}
	if opts, _ := pdev.deviceRunContainerOptions("nopod", "c"); opts != nil {
		t.Errorf("an unknown pod got %v", opts)
	}
}
