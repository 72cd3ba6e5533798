package devicemanager

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
)

// nodeWithoutTopology is the NUMA node under which devices without topology
// are recorded, as the kubelet's checkpoint does.
const nodeWithoutTopology int64 = -1

// deviceAllocateInfo is what one container holds of one resource: the
// devices, by NUMA node, and the plugin's answer to Allocate for them.
type deviceAllocateInfo struct {
	deviceIDs checkpoint.DevicesPerNUMA
	allocResp *pluginapi.ContainerAllocateResponse
}

type (
	resourceAllocateInfo map[string]deviceAllocateInfo   // by resource name
	containerDevices     map[string]resourceAllocateInfo // by container name
	// podDevices is the device manager's bookkeeping (the seed's podDevices):
	// pod UID → container name → resource name → devices and response. It
	// is plain data: the Manager guards it.
	podDevices map[string]containerDevices
)

// insert records an allocation, replacing any earlier one of the same pod,
// container and resource.
func (pdev podDevices) insert(podUID, contName, resource string, devices checkpoint.DevicesPerNUMA, resp *pluginapi.ContainerAllocateResponse) {
	if _, ok := pdev[podUID]; !ok {
		pdev[podUID] = make(containerDevices)
	}
	if _, ok := pdev[podUID][contName]; !ok {
		pdev[podUID][contName] = make(resourceAllocateInfo)
	}
	pdev[podUID][contName][resource] = deviceAllocateInfo{deviceIDs: devices, allocResp: resp}
}

// delete forgets the pods' allocations.
func (pdev podDevices) delete(podUIDs ...string) {
	for _, uid := range podUIDs {
		delete(pdev, uid)
	}
}

// pods returns the UIDs of every pod with an allocation.
func (pdev podDevices) pods() sets.Set[string] {
	return sets.KeySet(pdev)
}

// containerDevices returns the devices a container holds of a resource, or
// nil when it holds none.
func (pdev podDevices) containerDevices(podUID, contName, resource string) sets.Set[string] {
	info, ok := pdev[podUID][contName][resource]
	if !ok {
		return nil
	}
	return flatten(info.deviceIDs)
}

// devices returns, per resource, every device some container holds.
// Entries without an Allocate response do not count, as in the kubelet: they
// cannot be handed to a container.
func (pdev podDevices) devices() map[string]sets.Set[string] {
	out := make(map[string]sets.Set[string])
	for _, containers := range pdev {
		for _, resources := range containers {
			for resource, info := range resources {
				if info.allocResp == nil {
					continue
				}
				if out[resource] == nil {
					out[resource] = sets.New[string]()
				}
				out[resource].Insert(sets.List(flatten(info.deviceIDs))...)
			}
		}
	}
	return out
}

// addContainerAllocatedResources adds what the container holds to
// reusable: an init container's devices are free for the containers that
// run after it.
func (pdev podDevices) addContainerAllocatedResources(podUID, contName string, reusable map[string]sets.Set[string]) {
	for resource, info := range pdev[podUID][contName] {
		if reusable[resource] == nil {
			reusable[resource] = sets.New[string]()
		}
		reusable[resource].Insert(sets.List(flatten(info.deviceIDs))...)
	}
}

// removeContainerAllocatedResources takes what the container holds out of
// reusable: a running app container or sidecar keeps its devices.
func (pdev podDevices) removeContainerAllocatedResources(podUID, contName string, reusable map[string]sets.Set[string]) {
	for resource, info := range pdev[podUID][contName] {
		if reusable[resource] != nil {
			reusable[resource].Delete(sets.List(flatten(info.deviceIDs))...)
		}
	}
}

// toCheckpointData returns the entries of the checkpoint, sorted by pod,
// container and resource, each NUMA node's devices sorted, so that the same
// bookkeeping always writes the same bytes.
func (pdev podDevices) toCheckpointData() []checkpoint.PodDevicesEntry {
	var out []checkpoint.PodDevicesEntry
	for _, podUID := range slices.Sorted(maps.Keys(pdev)) {
		containers := pdev[podUID]
		for _, contName := range slices.Sorted(maps.Keys(containers)) {
			resources := containers[contName]
			for _, resource := range slices.Sorted(maps.Keys(resources)) {
				info := resources[resource]
				if info.allocResp == nil {
					continue
				}
				resp, err := marshalResponse(info.allocResp)
				if err != nil {
					// A response that came off the wire always marshals.
					continue
				}
				ids := checkpoint.DevicesPerNUMA{}
				for node, devs := range info.deviceIDs {
					ids[node] = slices.Sorted(slices.Values(devs))
				}
				out = append(out, checkpoint.PodDevicesEntry{
					PodUID: podUID, ContainerName: contName, ResourceName: resource,
					DeviceIDs: ids, AllocResp: resp,
				})
			}
		}
	}
	return out
}

// fromCheckpointData loads entries into pdev. An entry whose response does
// not decode is skipped and reported: the rest still load.
func (pdev podDevices) fromCheckpointData(entries []checkpoint.PodDevicesEntry) []error {
	var errs []error
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			errs = append(errs, fmt.Errorf("pod %s container %s resource %s: allocation response: %w",
				e.PodUID, e.ContainerName, e.ResourceName, err))
			continue
		}
		pdev.insert(e.PodUID, e.ContainerName, e.ResourceName, e.DeviceIDs, resp)
	}
	return errs
}

// marshalResponse encodes resp as the checkpoint stores it: protobuf, with
// map entries in key order so that equal responses give equal bytes.
func marshalResponse(resp *pluginapi.ContainerAllocateResponse) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(resp)
}

// flatten returns the devices of every NUMA node as one set.
func flatten(ids checkpoint.DevicesPerNUMA) sets.Set[string] {
	out := sets.New[string]()
	for _, devs := range ids {
		out.Insert(devs...)
	}
	return out
}
