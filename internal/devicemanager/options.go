package devicemanager

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DeviceRunContainerOptions is what a container's devices add to its CRI
// config: the Allocate responses of all its resources, merged.
type DeviceRunContainerOptions struct {
	Envs        []*runtimeapi.KeyValue
	Mounts      []*runtimeapi.Mount
	Devices     []*runtimeapi.Device
	Annotations map[string]string
	CDIDevices  []*runtimeapi.CDIDevice
	// DeviceIDs are the devices the container holds, resource name →
	// sorted IDs: what AnnotationDevices records in the runtime.
	DeviceIDs map[string][]string
}

// deviceRunContainerOptions merges the Allocate responses of every resource
// the container holds (the seed's function of the same name). Resources are
// taken in name order and, within a response, envs and annotations in key
// order, so the result is the same on every call. A setting repeated with
// the same value is kept once; one repeated with a different value keeps the
// first and is reported in conflicts. It returns nil when the container
// holds nothing.
func (pdev podDevices) deviceRunContainerOptions(podUID, contName string) (opts *DeviceRunContainerOptions, conflicts []string) {
	resources, ok := pdev[podUID][contName]
	if !ok || len(resources) == 0 {
		return nil, nil
	}
	opts = &DeviceRunContainerOptions{}
	envs := map[string]string{}
	mounts := map[string]string{}  // container path → host path
	devices := map[string]string{} // container path → host path
	cdi := map[string]bool{}
	conflict := func(resource, what, key, had, now string) {
		conflicts = append(conflicts, fmt.Sprintf("resource %s: %s %s has conflicting settings %q and %q; keeping %q", resource, what, key, had, now, had))
	}
	opts.DeviceIDs = make(map[string][]string, len(resources))
	for _, resource := range slices.Sorted(maps.Keys(resources)) {
		opts.DeviceIDs[resource] = sets.List(flatten(resources[resource].deviceIDs))
		resp := resources[resource].allocResp
		if resp == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(resp.Envs)) {
			v := resp.Envs[k]
			if had, ok := envs[k]; ok {
				if had != v {
					conflict(resource, "environment variable", k, had, v)
				}
				continue
			}
			envs[k] = v
			opts.Envs = append(opts.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
		}
		for _, m := range resp.Mounts {
			if had, ok := mounts[m.ContainerPath]; ok {
				if had != m.HostPath {
					conflict(resource, "mount", m.ContainerPath, had, m.HostPath)
				}
				continue
			}
			mounts[m.ContainerPath] = m.HostPath
			opts.Mounts = append(opts.Mounts, &runtimeapi.Mount{
				ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly,
			})
		}
		for _, d := range resp.Devices {
			if had, ok := devices[d.ContainerPath]; ok {
				if had != d.HostPath {
					conflict(resource, "device", d.ContainerPath, had, d.HostPath)
				}
				continue
			}
			devices[d.ContainerPath] = d.HostPath
			opts.Devices = append(opts.Devices, &runtimeapi.Device{
				ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions,
			})
		}
		for _, k := range slices.Sorted(maps.Keys(resp.Annotations)) {
			v := resp.Annotations[k]
			if had, ok := opts.Annotations[k]; ok {
				if had != v {
					conflict(resource, "annotation", k, had, v)
				}
				continue
			}
			if opts.Annotations == nil {
				opts.Annotations = map[string]string{}
			}
			opts.Annotations[k] = v
		}
		for _, d := range resp.CdiDevices {
			if cdi[d.Name] {
				continue
			}
			cdi[d.Name] = true
			opts.CDIDevices = append(opts.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
		}
	}
	return opts, conflicts
}
