package kuberuntime

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
)

// addDeviceOptions adds what the container's device plugins answered to its
// config, in the kubelet's order: device envs and mounts before the
// container's own. Where both set the same variable or mount point, the
// container's spec wins, since the user wrote it; where a plugin's
// annotation has a key berth sets itself, berth's wins, as in the kubelet.
func addDeviceOptions(cfg *runtimeapi.ContainerConfig, dev *devicemanager.DeviceRunContainerOptions) {
	if dev == nil {
		return
	}
	own := make(map[string]bool, len(cfg.Envs))
	for _, e := range cfg.Envs {
		own[e.Key] = true
	}
	var envs []*runtimeapi.KeyValue
	for _, e := range dev.Envs {
		if !own[e.Key] {
			envs = append(envs, e)
		}
	}
	cfg.Envs = append(envs, cfg.Envs...)

	mounted := make(map[string]bool, len(cfg.Mounts))
	for _, m := range cfg.Mounts {
		mounted[m.ContainerPath] = true
	}
	var mounts []*runtimeapi.Mount
	for _, m := range dev.Mounts {
		if !mounted[m.ContainerPath] {
			mounts = append(mounts, m)
		}
	}
	cfg.Mounts = append(mounts, cfg.Mounts...)

	cfg.Devices = append(cfg.Devices, dev.Devices...)
	cfg.CDIDevices = append(cfg.CDIDevices, dev.CDIDevices...)
	for k, v := range dev.Annotations {
		if _, taken := cfg.Annotations[k]; !taken {
			cfg.Annotations[k] = v
		}
	}
}
