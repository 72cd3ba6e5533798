package devicemanager

import (
	"maps"
	"slices"
	"time"

	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ResourceStatus is one resource as `berth devices` and the local API show it.
type ResourceStatus struct {
	Name        string `json:"name"`
	Capacity    int    `json:"capacity"`
	Allocatable int    `json:"allocatable"`
	// Connected tells whether its plugin is registered and streaming.
	Connected bool `json:"connected"`
	// Listed tells whether the connected plugin has sent its device list:
	// until it has, the resource is not offered to admission.
	Listed bool `json:"listed"`
	// Endpoint is the plugin's socket while it is connected.
	Endpoint string `json:"endpoint,omitempty"`
	// DisconnectedAt is when the plugin went away; the resource is
	// forgotten endpointGracePeriod later.
	DisconnectedAt *time.Time `json:"disconnectedAt,omitempty"`
	// Problem says why the devices are unhealthy as a whole, if they are.
	Problem string         `json:"problem,omitempty"`
	Devices []DeviceStatus `json:"devices"`
}

// DeviceStatus is one device of a resource.
type DeviceStatus struct {
	ID     string  `json:"id"`
	Health string  `json:"health"`
	NUMA   []int64 `json:"numa,omitempty"`
}

// Snapshot is the device manager as the local API's /devices shows it.
type Snapshot struct {
	Resources   []ResourceStatus `json:"resources"`
	Allocations []Allocation     `json:"allocations"`
}

// Allocation is the devices one container holds of one resource.
type Allocation struct {
	// PodNamespace and PodName are filled in by the caller, which knows the
	// pods; the checkpoint only has UIDs.
	PodNamespace string   `json:"podNamespace,omitempty"`
	PodName      string   `json:"podName,omitempty"`
	PodUID       string   `json:"podUID"`
	Container    string   `json:"container"`
	Resource     string   `json:"resource"`
	DeviceIDs    []string `json:"deviceIDs"`
}

// Resources returns every known resource, by name.
func (m *Manager) Resources() []ResourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpiredLocked()
	out := make([]ResourceStatus, 0, len(m.resources))
	for _, name := range sortedKeys(m.resources) {
		r := m.resources[name]
		healthy := r.healthy()
		s := ResourceStatus{
			Name: name, Capacity: len(r.devices), Allocatable: healthy.Len(),
			Connected: r.ep != nil, Listed: r.ep != nil && r.listed, Problem: r.invalid, Devices: []DeviceStatus{},
		}
		if r.ep != nil {
			s.Endpoint = r.ep.socket
		} else {
			at := r.disconnectedAt
			s.DisconnectedAt = &at
			s.Problem = "device plugin not connected"
		}
		for _, id := range sortedKeys(r.devices) {
			health := pluginapi.Unhealthy
			if healthy.Has(id) {
				health = pluginapi.Healthy
			}
			s.Devices = append(s.Devices, DeviceStatus{ID: id, Health: health, NUMA: numaNodes(r.devices[id])})
		}
		out = append(out, s)
	}
	return out
}

// Allocations returns every recorded allocation, by pod, container and
// resource.
func (m *Manager) Allocations() []Allocation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Allocation
	for _, uid := range sortedKeys(m.pods) {
		for _, name := range sortedKeys(m.pods[uid]) {
			for _, resource := range sortedKeys(m.pods[uid][name]) {
				out = append(out, Allocation{PodUID: uid, Container: name, Resource: resource,
					DeviceIDs: sets.List(flatten(m.pods[uid][name][resource].deviceIDs))})
			}
		}
	}
	return out
}

// GetDevices returns the devices a container holds, for the pod-resources
// API: one entry per resource and NUMA node, as the kubelet reports them.
func (m *Manager) GetDevices(podUID, containerName string) []*podresourcesapi.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	resources := m.pods[podUID][containerName]
	var out []*podresourcesapi.ContainerDevices
	for _, name := range sortedKeys(resources) {
		ids := resources[name].deviceIDs
		for _, n := range slices.Sorted(maps.Keys(ids)) {
			cd := &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: slices.Sorted(slices.Values(ids[n]))}
			if n != nodeWithoutTopology {
				cd.Topology = &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: n}}}
			}
			out = append(out, cd)
		}
	}
	return out
}

// GetAllocatableDevices returns every healthy device, one entry per device
// and NUMA node, for the pod-resources API.
func (m *Manager) GetAllocatableDevices() []*podresourcesapi.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*podresourcesapi.ContainerDevices
	for _, name := range sortedKeys(m.resources) {
		r := m.resources[name]
		for _, id := range sets.List(r.healthy()) {
			nodes := numaNodes(r.devices[id])
			if len(nodes) == 0 {
				out = append(out, &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: []string{id}})
				continue
			}
			for _, n := range nodes {
				out = append(out, &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: []string{id},
					Topology: &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: n}}}})
			}
		}
	}
	return out
}

// numaNodes returns the NUMA nodes of a device, none without topology.
func numaNodes(d *pluginapi.Device) []int64 {
	if d == nil || d.Topology == nil {
		return nil
	}
	var out []int64
	for _, n := range d.Topology.Nodes {
		if n != nil {
			out = append(out, n.ID)
		}
	}
	return out
}

func resourceQuantity(n int) *apiresource.Quantity {
	return apiresource.NewQuantity(int64(n), apiresource.DecimalSI)
}
