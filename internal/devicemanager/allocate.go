package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/internal/v1helper"
)

// NotReadyError is returned when a resource a pod needs has no connected
// plugin (berth has not heard from it since it started, or its stream
// broke), or one that has registered and not yet sent its device list.
// The pod may wait for it.
type NotReadyError struct {
	Resource string
	// Known tells a plugin that was seen and went away from one never seen.
	Known bool
	// Unlisted tells a plugin that is connected and has not listed its
	// devices yet: for the few milliseconds between its registration and
	// its first ListAndWatch answer it has none, and a pod planned then
	// would be refused for good for too few devices.
	Unlisted bool
}

func (e *NotReadyError) Error() string {
	if e.Unlisted {
		return fmt.Sprintf("the device plugin for %s has not listed its devices yet", e.Resource)
	}
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

// containerRequests returns the extended resources a container of pod
// asks for a device plugin's devices for, in name order. Extended
// resources cannot be overcommitted, so the limit is the request. One the
// scheduler allocated through the pod's extended resource claim is a DRA
// driver's, prepared with the pod's claims, as the kubelet's device
// manager leaves it (isDRAExtendedResource).
func containerRequests(pod *v1.Pod, c *v1.Container) []deviceRequest {
	var out []deviceRequest
	for _, name := range sortedKeys(c.Resources.Limits) {
		q := c.Resources.Limits[name]
		if v1helper.IsExtendedResourceName(name) && q.Value() > 0 && !v1helper.BackedByDRA(pod, c.Name, name) {
			out = append(out, deviceRequest{resource: string(name), count: int(q.Value())})
		}
	}
	return out
}

// NeedsDevices tells whether any container of pod asks for a device.
func NeedsDevices(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if len(containerRequests(pod, &cs[i])) > 0 {
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
	m.UpdateAllocatedDevices()
	err := m.allocate(ctx, pod, podContainers(pod))
	if err != nil {
		m.forgetPod(string(pod.UID))
	}
	return err
}

// allocate gives the containers cs of pod the devices they need and do
// not hold yet, and records them in the checkpoint; on error it records
// none of them. It holds the manager's lock only to read and to change
// its state, never across a plugin call or a file write:
//
//  1. plan on a copy of the state, asking the plugins for their
//     preference where there is a choice (no lock);
//  2. plan again, with the same advice, on the state of this moment, and
//     reserve the devices (lock): what changed since step 1 (a device
//     taken by another pod, gone unhealthy, or its plugin gone) is planned
//     around here, with no second round of questions, since advice is
//     only advice; what can no longer be satisfied fails as it would have
//     in step 1. (The kubelet chooses among the devices it read before it
//     asked for the preference, with its lock released meanwhile: it may
//     hand out a device that went unhealthy during the question.)
//  3. ask each plugin to Allocate (no lock); reserved devices are in use
//     for every other allocation meanwhile;
//  4. record the answers and free the reservation (lock), then write the
//     checkpoint from a snapshot taken then (no lock).
//
// A device that goes unhealthy after it was reserved stays allocated, as
// in the kubelet: the plugin said yes to it.
func (m *Manager) allocate(ctx context.Context, pod *v1.Pod, cs []planContainer) error {
	st, eps := m.readAllocState(string(pod.UID), cs)
	advice := map[stepKey][]string{}
	steps, err := planPod(st, cs, m.liveAdviser(ctx, pod, eps, advice))
	if err != nil || len(steps) == 0 {
		return err
	}
	res, err := m.reserve(string(pod.UID), cs, advice)
	if err != nil || len(res.steps) == 0 {
		return err
	}
	resps, err := callAllocate(ctx, res)
	if err != nil {
		m.release(res)
		return err
	}
	snap := m.record(res, resps)
	for _, s := range res.steps {
		m.log.Info("allocated devices", "pod", pod.Namespace+"/"+pod.Name, "container", s.container,
			"resource", s.resource, "devices", s.devices)
	}
	return m.writeCheckpoint(snap)
}

// stepKey names the allocation of one resource to one container.
type stepKey struct{ container, resource string }

// readAllocState copies what planning cs needs, and the endpoints of the
// resources that have one.
func (m *Manager) readAllocState(uid string, cs []planContainer) (allocState, map[string]*endpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allocStateLocked(uid, cs)
}

func (m *Manager) allocStateLocked(uid string, cs []planContainer) (allocState, map[string]*endpoint) {
	st := allocState{uid: uid, resources: map[string]resourceState{}, held: containerDevices{}}
	eps := map[string]*endpoint{}
	var inUse map[string]sets.Set[string]
	for _, c := range cs {
		for _, req := range c.requests {
			r := m.resources[req.resource]
			if _, done := st.resources[req.resource]; done || r == nil {
				continue
			}
			if inUse == nil {
				inUse = m.pods.devices()
			}
			st.resources[req.resource] = resourceState{
				connected: r.ep != nil,
				listed:    r.ep != nil && r.listed,
				preferred: r.ep != nil && r.ep.opts.GetGetPreferredAllocationAvailable(),
				healthy:   r.healthy(),
				inUse:     inUse[req.resource].Union(m.reserved[req.resource]),
			}
			if r.ep != nil {
				eps[req.resource] = r.ep
			}
		}
	}
	for name, resources := range m.pods[uid] {
		st.held[name] = maps.Clone(resources)
	}
	return st, eps
}

// liveAdviser asks the plugins in eps for their preference, with no lock
// held, and keeps each answer in advice. A plugin that fails gives none:
// berth chooses without it.
func (m *Manager) liveAdviser(ctx context.Context, pod *v1.Pod, eps map[string]*endpoint, advice map[stepKey][]string) adviser {
	return func(q adviceQuery) []string {
		preferred, err := eps[q.resource].preferred(ctx, q.available, q.mustInclude, q.size)
		if err != nil {
			m.log.Warn("device plugin's GetPreferredAllocation failed; choosing without it",
				"resource", q.resource, "pod", pod.Namespace+"/"+pod.Name, "container", q.container, "err", err)
		}
		advice[stepKey{q.container, q.resource}] = preferred
		return preferred
	}
}

// reservation is a plan whose new devices are booked, and the endpoints
// to ask for them.
type reservation struct {
	uid   string
	steps []allocStep
	eps   map[string]*endpoint
	// booked are the devices this reservation added to Manager.reserved.
	booked map[string]sets.Set[string]
}

// reserve plans cs again on the current state with the advice gathered,
// and books the devices it chooses that no container holds yet.
func (m *Manager) reserve(uid string, cs []planContainer, advice map[stepKey][]string) (reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, eps := m.allocStateLocked(uid, cs)
	steps, err := planPod(st, cs, func(q adviceQuery) []string { return advice[stepKey{q.container, q.resource}] })
	if err != nil || len(steps) == 0 {
		return reservation{}, err
	}
	res := reservation{uid: uid, steps: steps, eps: eps, booked: map[string]sets.Set[string]{}}
	held := m.pods.devices()
	for _, s := range steps {
		for _, id := range s.devices {
			if held[s.resource].Has(id) {
				continue // reused from the pod's own init containers
			}
			if m.reserved[s.resource] == nil {
				m.reserved[s.resource] = sets.New[string]()
			}
			if res.booked[s.resource] == nil {
				res.booked[s.resource] = sets.New[string]()
			}
			m.reserved[s.resource].Insert(id)
			res.booked[s.resource].Insert(id)
		}
	}
	m.inflight[uid]++
	return res, nil
}

// release frees a reservation whose allocation failed.
func (m *Manager) release(res reservation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(res)
}

func (m *Manager) releaseLocked(res reservation) {
	for resource, ids := range res.booked {
		m.reserved[resource].Delete(sets.List(ids)...)
		if m.reserved[resource].Len() == 0 {
			delete(m.reserved, resource)
		}
	}
	if m.inflight[res.uid]--; m.inflight[res.uid] <= 0 {
		delete(m.inflight, res.uid)
	}
}

// callAllocate asks the plugins to allocate each step's devices, in order,
// one container request per call as the kubelet does.
func callAllocate(ctx context.Context, res reservation) ([]*pluginapi.ContainerAllocateResponse, error) {
	resps := make([]*pluginapi.ContainerAllocateResponse, len(res.steps))
	for i, s := range res.steps {
		resp, err := res.eps[s.resource].allocate(ctx, s.devices)
		if err != nil {
			return nil, fmt.Errorf("the device plugin for %s failed to allocate %v for container %s: %w", s.resource, s.devices, s.container, err)
		}
		resps[i] = resp
	}
	return resps, nil
}

// record books the plugins' answers to a reservation's steps, frees the
// reservation, and returns the checkpoint to write. A container that got
// the same resource from another allocation meanwhile keeps that one.
func (m *Manager) record(res reservation, resps []*pluginapi.ContainerAllocateResponse) checkpointSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(res)
	for i, s := range res.steps {
		if m.pods.containerDevices(res.uid, s.container, s.resource) != nil {
			continue
		}
		m.pods.insert(res.uid, s.container, s.resource, m.perNUMALocked(s.resource, s.devices), resps[i])
		m.touchLocked(res.uid)
	}
	return m.snapshotLocked()
}

// perNUMALocked sorts devs of resource by the NUMA nodes the plugin
// lists them on, those without topology under nodeWithoutTopology.
func (m *Manager) perNUMALocked(resource string, devs []string) checkpoint.DevicesPerNUMA {
	var known map[string]*pluginapi.Device
	if r := m.resources[resource]; r != nil {
		known = r.devices
	}
	out := checkpoint.DevicesPerNUMA{}
	for _, id := range devs {
		nodes := numaNodes(known[id])
		if len(nodes) == 0 {
			nodes = []int64{nodeWithoutTopology}
		}
		for _, n := range nodes {
			out[n] = append(out[n], id)
		}
	}
	return out
}

// forgetPod frees every device a pod holds, after its admission failed.
func (m *Manager) forgetPod(uid string) {
	m.mu.Lock()
	if _, had := m.pods[uid]; !had {
		m.mu.Unlock()
		return
	}
	m.pods.delete(uid)
	delete(m.touched, uid)
	snap := m.snapshotLocked()
	m.mu.Unlock()
	if err := m.writeCheckpoint(snap); err != nil {
		m.log.Error("writing the device checkpoint", "err", err)
	}
}

// ContainerOptions returns what a container's devices add to its CRI
// config, or nil when it has none. A container that holds no record of its
// devices (created by a berth that did not record them in the runtime, and
// the checkpoint lost) gets them allocated now; one whose record was
// recovered from the runtime has its plugins asked again for their answer.
// Plugins that asked for it hear PreStartContainer first.
func (m *Manager) ContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*DeviceRunContainerOptions, error) {
	reqs := containerRequests(pod, c)
	if len(reqs) == 0 {
		return nil, nil
	}
	uid := string(pod.UID)
	view := m.readContainer(uid, c.Name, reqs)
	if view.missing {
		cs := []planContainer{{name: c.Name, role: roleApp, requests: reqs}}
		if err := m.allocate(ctx, pod, cs); err != nil {
			return nil, err
		}
		view = m.readContainer(uid, c.Name, reqs)
	}
	if view.notReady != nil {
		return nil, view.notReady
	}
	resps, err := askAgain(ctx, c.Name, view.refresh)
	if err != nil {
		return nil, err
	}
	opts, conflicts, preStarts, err := m.finishContainer(uid, c.Name, reqs, view.refresh, resps)
	if err != nil {
		return nil, err
	}

	var errs []error
	for _, p := range preStarts {
		if err := p.ep.preStart(ctx, p.devices); err != nil {
			errs = append(errs, fmt.Errorf("PreStartContainer of %s for container %s: %w", p.resource, c.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, msg := range conflicts {
		m.log.Warn("device plugins' settings conflict", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "conflict", msg)
		m.podEvent(pod, v1.EventTypeWarning, ReasonConflictingOptions, fmt.Sprintf("Container %s: %s", c.Name, msg))
	}
	return opts, nil
}

// containerView is what ContainerOptions reads of one container.
type containerView struct {
	// missing tells that a resource the container asks for has no record.
	missing bool
	// refresh are the recorded allocations without the plugin's answer.
	refresh []pluginCall
	// notReady is the first resource to refresh whose plugin is not
	// connected.
	notReady error
}

// pluginCall is a call to make about devices of one resource.
type pluginCall struct {
	resource string
	ep       *endpoint
	devices  []string
}

// readContainer reads which of a container's resources have no record,
// and which have no answer from the plugin: an allocation recovered from
// the runtime records the devices, not what the container needs to use
// them. A plugin whose answer really is empty is asked again each time,
// which costs one call.
func (m *Manager) readContainer(uid, contName string, reqs []deviceRequest) containerView {
	m.mu.Lock()
	defer m.mu.Unlock()
	var view containerView
	for _, req := range reqs {
		info, ok := m.pods[uid][contName][req.resource]
		switch {
		case !ok:
			view.missing = true
			continue
		case info.allocResp != nil && proto.Size(info.allocResp) > 0:
			continue
		}
		r := m.resources[req.resource]
		if r == nil || r.ep == nil {
			if view.notReady == nil {
				view.notReady = &NotReadyError{Resource: req.resource, Known: r != nil}
			}
			continue
		}
		view.refresh = append(view.refresh, pluginCall{resource: req.resource, ep: r.ep, devices: sets.List(flatten(info.deviceIDs))})
	}
	return view
}

// askAgain asks the plugins for their Allocate answer about devices a
// container holds already: nothing is chosen, so no lock is needed.
func askAgain(ctx context.Context, contName string, calls []pluginCall) ([]*pluginapi.ContainerAllocateResponse, error) {
	resps := make([]*pluginapi.ContainerAllocateResponse, len(calls))
	for i, c := range calls {
		resp, err := c.ep.allocate(ctx, c.devices)
		if err != nil {
			return nil, fmt.Errorf("the device plugin for %s failed to allocate %v again for container %s: %w", c.resource, c.devices, contName, err)
		}
		resps[i] = resp
	}
	return resps, nil
}

// finishContainer records the answers askAgain got, where the container
// still holds the same devices, writes the checkpoint if it asked, and
// returns the container's options, their conflicts and the
// PreStartContainer calls to make.
func (m *Manager) finishContainer(uid, contName string, reqs []deviceRequest, asked []pluginCall,
	resps []*pluginapi.ContainerAllocateResponse) (*DeviceRunContainerOptions, []string, []pluginCall, error) {
	m.mu.Lock()
	for i, c := range asked {
		if cur, ok := m.pods[uid][contName][c.resource]; ok && flatten(cur.deviceIDs).Equal(sets.New(c.devices...)) {
			m.pods.insert(uid, contName, c.resource, cur.deviceIDs, resps[i])
			m.touchLocked(uid)
		}
	}
	var preStarts []pluginCall
	for _, req := range reqs {
		// A plugin that is not connected cannot be told; the devices are
		// the container's all the same.
		if r := m.resources[req.resource]; r != nil && r.ep != nil {
			devs := sets.List(m.pods.containerDevices(uid, contName, req.resource))
			preStarts = append(preStarts, pluginCall{resource: req.resource, ep: r.ep, devices: devs})
		}
	}
	opts, conflicts := m.pods.deviceRunContainerOptions(uid, contName)
	var snap checkpointSnapshot
	if len(asked) > 0 {
		snap = m.snapshotLocked()
	}
	m.mu.Unlock()
	if len(asked) > 0 {
		if err := m.writeCheckpoint(snap); err != nil {
			return nil, nil, nil, err
		}
	}
	return opts, conflicts, preStarts, nil
}
