package kuberuntime

import (
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/devicemanager"
)

func TestContainerConfigWithDevices(t *testing.T) {
	pod := appPod()
	c := &pod.Spec.Containers[0]
	opts := ContainerOptions{
		VolumePaths:        map[string]string{"data": "/vol/data"},
		NodeMemoryCapacity: 4 * gi,
		Devices: &devicemanager.DeviceRunContainerOptions{
			Envs: []*runtimeapi.KeyValue{
				{Key: "WIDGET_DEVICES", Value: []byte("w0,w1")},
				{Key: "GREETING", Value: []byte("from the plugin")},
			},
			Mounts: []*runtimeapi.Mount{
				{ContainerPath: "/usr/lib/widget", HostPath: "/opt/widget/lib", Readonly: true},
				{ContainerPath: "/data", HostPath: "/plugin/data"},
			},
			Devices: []*runtimeapi.Device{{ContainerPath: "/dev/w0", HostPath: "/dev/null", Permissions: "rw"}},
			Annotations: map[string]string{"example.com/widget-ids": "w0,w1", container.AnnotationRestartCount: "99",
				devicemanager.AnnotationDevices: "the plugin's"},
			CDIDevices: []*runtimeapi.CDIDevice{{Name: "example.com/widget=w0"}},
			DeviceIDs:  map[string][]string{"example.com/widget": {"w0", "w1"}},
		},
	}
	cfg, err := ContainerConfig(pod, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	var envs []string
	for _, e := range cfg.Envs {
		envs = append(envs, e.Key+"="+string(e.Value))
	}
	// Device envs first; the container's own GREETING wins over the plugin's.
	if len(envs) != 3 || envs[0] != "WIDGET_DEVICES=w0,w1" || envs[1] != "POD_NAME=web" || envs[2] != "GREETING=hello-web" {
		t.Errorf("envs = %q", envs)
	}
	// Device mounts first; the container's own /data wins.
	if len(cfg.Mounts) != 2 || cfg.Mounts[0].ContainerPath != "/usr/lib/widget" || cfg.Mounts[1].HostPath != "/vol/data" {
		t.Errorf("mounts = %v", cfg.Mounts)
	}
	if len(cfg.Devices) != 1 || !proto.Equal(cfg.Devices[0], opts.Devices.Devices[0]) {
		t.Errorf("devices = %v", cfg.Devices)
	}
	if len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "example.com/widget=w0" {
		t.Errorf("CDI devices = %v", cfg.CDIDevices)
	}
	if cfg.Annotations["example.com/widget-ids"] != "w0,w1" || cfg.Annotations[container.AnnotationRestartCount] != "0" {
		t.Errorf("annotations = %v", cfg.Annotations)
	}
	// The runtime records the devices, in berth's words, not the plugin's.
	if got, want := cfg.Annotations[devicemanager.AnnotationDevices], `{"example.com/widget":["w0","w1"]}`; got != want {
		t.Errorf("annotation %s = %q, want %q", devicemanager.AnnotationDevices, got, want)
	}

	cfg, err = ContainerConfig(pod, c, ContainerOptions{VolumePaths: opts.VolumePaths, NodeMemoryCapacity: 4 * gi})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := cfg.Annotations[devicemanager.AnnotationDevices]; ok {
		t.Errorf("a container without devices has annotation %s = %q", devicemanager.AnnotationDevices, v)
	}
}
