package devicemanager

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/internal/v1helper"
)

// NotReadyError is returned when a resource a pod needs has no connected
// plugin: berth has not heard from it since it started, or its stream
// broke. The pod may wait for it.
type NotReadyError struct {
	Resource string
	// Known tells a plugin that was seen and went away from one never seen.
	Known bool
}

func (e *NotReadyError) Error() string {
	if e.Known {
		return fmt.Sprintf("the device plugin for %s is not connected", e.Resource)
	}
	return fmt.Sprintf("no device plugin for %s has registered", e.Resource)
}

// deviceRequest is a container's need for one resource.
type deviceRequest struct {
	resource string
	count    int
}

// containerRequests returns the extended resources a container asks for,
// in name order. Extended resources cannot be overcommitted, so the limit is
// the request.
func containerRequests(c *v1.Container) []deviceRequest {
	var out []deviceRequest
	for _, name := range sortedKeys(c.Resources.Limits) {
		q := c.Resources.Limits[name]
		if v1helper.IsExtendedResourceName(name) && q.Value() > 0 {
			out = append(out, deviceRequest{resource: string(name), count: int(q.Value())})
		}
	}
	return out
}

// NeedsDevices tells whether any container of pod asks for a device.
func NeedsDevices(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if len(containerRequests(&cs[i])) > 0 {
				return true
			}
		}
	}
	return false
}

// Admit allocates the devices of every container of a pod that is about to
// start, init containers first, in order: each init container's devices
// are free again for the containers after it, unless it is a sidecar,
// which keeps them. The allocations are in the checkpoint when Admit
// returns. On error nothing stays allocated to the pod; a *NotReadyError
// means the pod may wait for the plugin, anything else rejects it.
func (m *Manager) Admit(ctx context.Context, pod *v1.Pod) error {
	if !NeedsDevices(pod) {
		return nil
	}
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	m.UpdateAllocatedDevices()

	uid := string(pod.UID)
	reusable := map[string]sets.Set[string]{}
	err := func() error {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if err := m.allocateContainer(ctx, pod, c, reusable); err != nil {
				return err
			}
			m.mu.Lock()
			if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
				m.pods.removeContainerAllocatedResources(uid, c.Name, reusable)
			} else {
				m.pods.addContainerAllocatedResources(uid, c.Name, reusable)
			}
			m.mu.Unlock()
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if err := m.allocateContainer(ctx, pod, c, reusable); err != nil {
				return err
			}
			m.mu.Lock()
			m.pods.removeContainerAllocatedResources(uid, c.Name, reusable)
			m.mu.Unlock()
		}
		return nil
	}()
	if err != nil {
		m.mu.Lock()
		if _, had := m.pods[uid]; had {
			m.pods.delete(uid)
			if werr := m.writeCheckpointLocked(); werr != nil {
				m.log.Error("writing the device checkpoint", "err", werr)
			}
		}
		m.mu.Unlock()
		return err
	}
	return nil
}

// allocateContainer gives a container the devices it needs and does not
// hold yet, asking each plugin, then writes the checkpoint. Callers hold
// allocMu.
func (m *Manager) allocateContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, reusable map[string]sets.Set[string]) error {
	uid := string(pod.UID)
	changed := false
	for _, req := range containerRequests(c) {
		m.mu.Lock()
		if have := m.pods.containerDevices(uid, c.Name, req.resource); have != nil {
			m.mu.Unlock()
			if have.Len() != req.count {
				return fmt.Errorf("container %s changed its request for %s from %d to %d", c.Name, req.resource, have.Len(), req.count)
			}
			continue // a restart: it keeps what it had
		}
		r := m.resources[req.resource]
		if r == nil || r.ep == nil {
			m.mu.Unlock()
			return &NotReadyError{Resource: req.resource, Known: r != nil}
		}
		ep := r.ep
		available := r.healthy().Difference(m.pods.devices()[req.resource])
		ch, err := chooseFrom(req.resource, req.count, reusable[req.resource], available)
		m.mu.Unlock()
		if err != nil {
			return err
		}

		var preferred []string
		if ep.opts.GetGetPreferredAllocationAvailable() && ch.needsPreference() {
			offered := sets.List(ch.available.Union(sets.New(ch.reused...)))
			preferred, err = ep.preferred(ctx, offered, ch.reused, req.count)
			if err != nil {
				// Only advice: berth chooses without it.
				m.log.Warn("device plugin's GetPreferredAllocation failed; choosing without it",
					"resource", req.resource, "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
			}
		}
		devs := ch.finish(preferred)
		resp, err := ep.allocate(ctx, devs)
		if err != nil {
			return fmt.Errorf("the device plugin for %s failed to allocate %v for container %s: %w", req.resource, devs, c.Name, err)
		}

		m.mu.Lock()
		perNUMA := checkpoint.DevicesPerNUMA{}
		for _, id := range devs {
			nodes := numaNodes(r.devices[id])
			if len(nodes) == 0 {
				nodes = []int64{nodeWithoutTopology}
			}
			for _, n := range nodes {
				perNUMA[n] = append(perNUMA[n], id)
			}
		}
		m.pods.insert(uid, c.Name, req.resource, perNUMA, resp)
		m.mu.Unlock()
		changed = true
		m.log.Info("allocated devices", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name,
			"resource", req.resource, "devices", devs)
	}
	if !changed {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writeCheckpointLocked()
}

// ContainerOptions returns what a container's devices add to its CRI
// config, or nil when it has none. A container that holds no record of its
// devices (created by a berth that did not record them in the runtime, and
// the checkpoint lost) gets them allocated now; one whose record was
// recovered from the runtime has its plugins asked again for their answer.
// Plugins that asked for it hear PreStartContainer first.
func (m *Manager) ContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*DeviceRunContainerOptions, error) {
	reqs := containerRequests(c)
	if len(reqs) == 0 {
		return nil, nil
	}
	uid := string(pod.UID)
	m.mu.Lock()
	missing := false
	for _, req := range reqs {
		if m.pods.containerDevices(uid, c.Name, req.resource) == nil {
			missing = true
		}
	}
	m.mu.Unlock()
	if missing {
		m.allocMu.Lock()
		err := m.allocateContainer(ctx, pod, c, nil)
		m.allocMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	for _, req := range reqs {
		if err := m.refreshResponse(ctx, uid, c.Name, req.resource); err != nil {
			return nil, err
		}
	}

	var errs []error
	for _, req := range reqs {
		m.mu.Lock()
		devs := sets.List(m.pods.containerDevices(uid, c.Name, req.resource))
		var ep *endpoint
		if r := m.resources[req.resource]; r != nil {
			ep = r.ep
		}
		m.mu.Unlock()
		if ep == nil {
			// A plugin that is not connected cannot be told; the devices
			// are the container's all the same.
			continue
		}
		if err := ep.preStart(ctx, devs); err != nil {
			errs = append(errs, fmt.Errorf("PreStartContainer of %s for container %s: %w", req.resource, c.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	m.mu.Lock()
	opts, conflicts := m.pods.deviceRunContainerOptions(uid, c.Name)
	m.mu.Unlock()
	for _, msg := range conflicts {
		m.log.Warn("device plugins' settings conflict", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "conflict", msg)
		m.podEvent(pod, v1.EventTypeWarning, ReasonConflictingOptions, fmt.Sprintf("Container %s: %s", c.Name, msg))
	}
	return opts, nil
}

// refreshResponse asks the plugin again for its Allocate answer about the
// devices a container holds of resource, when berth has none: an
// allocation recovered from the runtime records the devices, not what the
// container needs to use them. A plugin whose answer really is empty is
// asked again each time, which costs one call. It holds neither mutex
// during the call: the devices are the container's already, so nothing is
// chosen.
func (m *Manager) refreshResponse(ctx context.Context, uid, contName, resource string) error {
	m.mu.Lock()
	info, ok := m.pods[uid][contName][resource]
	if !ok || (info.allocResp != nil && proto.Size(info.allocResp) > 0) {
		m.mu.Unlock()
		return nil
	}
	r := m.resources[resource]
	if r == nil || r.ep == nil {
		m.mu.Unlock()
		return &NotReadyError{Resource: resource, Known: r != nil}
	}
	ep, devs := r.ep, flatten(info.deviceIDs)
	m.mu.Unlock()

	resp, err := ep.allocate(ctx, sets.List(devs))
	if err != nil {
		return fmt.Errorf("the device plugin for %s failed to allocate %v again for container %s: %w", resource, sets.List(devs), contName, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.pods[uid][contName][resource]; ok && flatten(cur.deviceIDs).Equal(devs) {
		m.pods.insert(uid, contName, resource, cur.deviceIDs, resp)
	}
	return m.writeCheckpointLocked()
}
