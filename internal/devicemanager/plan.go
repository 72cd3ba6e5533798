package devicemanager

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
)

// The allocation of a pod's devices is planned by a pure function over a
// copy of the manager's state (allocState), so that the plugins are called
// with no lock held. The manager's side (allocate.go) reads the state, asks
// the plugins for their preference, plans again on the state of the moment
// of commit, reserves, calls Allocate and records.

// containerRole is what becomes of a container's devices once it is
// planned, as the kubelet's Allocate treats them.
type containerRole int

const (
	// roleInit: an init container that runs to completion; its devices are
	// free again for the containers after it.
	roleInit containerRole = iota
	// roleSidecar: a restartable init container; it keeps its devices.
	roleSidecar
	// roleApp: an app container; it keeps its devices.
	roleApp
)

// planContainer is one container to plan for, in the order the kubelet
// allocates: init containers first, in order, then the app containers.
type planContainer struct {
	name     string
	role     containerRole
	requests []deviceRequest
}

// podContainers returns the containers of pod in allocation order.
func podContainers(pod *v1.Pod) []planContainer {
	var out []planContainer
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		role := roleInit
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			role = roleSidecar
		}
		out = append(out, planContainer{name: c.Name, role: role, requests: containerRequests(pod, c)})
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		out = append(out, planContainer{name: c.Name, role: roleApp, requests: containerRequests(pod, c)})
	}
	return out
}

// resourceState is what the planner knows of one resource.
type resourceState struct {
	// connected tells whether a plugin is registered and streaming; a
	// resource known without one (gone, or known from the checkpoint) is
	// in allocState with connected false.
	connected bool
	// listed tells whether the connected plugin has sent its device list.
	listed bool
	// preferred tells whether the plugin offers GetPreferredAllocation.
	preferred bool
	healthy   sets.Set[string]
	// inUse are the devices that some container holds (this pod's
	// included) or that an allocation in flight has reserved.
	inUse sets.Set[string]
}

// allocState is a copy of the manager's state as one pod's allocation
// needs it. The planner never changes it.
type allocState struct {
	uid string
	// resources has the resources the pod asks for that berth knows of.
	resources map[string]resourceState
	// held is what the pod's containers hold already: container name →
	// resource → devices.
	held containerDevices
}

// allocStep is one allocation to make: devices of one resource for one
// container, in the order chosen (reused devices first, then the plugin's
// preference, then ID order).
type allocStep struct {
	container string
	resource  string
	devices   []string
}

// adviceQuery is a question for a plugin's GetPreferredAllocation.
type adviceQuery struct {
	container, resource string
	available           []string
	mustInclude         []string
	size                int
}

// adviser answers adviceQuery with the devices the plugin prefers, nil
// when it has no advice (or failed: advice is never required).
type adviser func(adviceQuery) []string

// planPod returns the allocations that give every container of cs the
// devices it asks for and does not hold yet, following the kubelet's
// rules: resources in name order per container; a container that holds a
// resource already keeps it (a restart), and fails if its request
// changed; the devices an init container frees are reused first by the
// containers after it; then the plugin's preference where it has one and
// there is a choice; then the free healthy devices in ID order.
//
// A resource without a connected plugin gives a *NotReadyError; too few
// devices give the kubelet's "requested number of devices unavailable"
// error. advise is called only where the plugin offers a preference and
// it can change the outcome.
func planPod(st allocState, cs []planContainer, advise adviser) ([]allocStep, error) {
	// A working copy of the pod's holdings and of the devices in use,
	// which each step adds to.
	pod := podDevices{st.uid: containerDevices{}}
	for name, resources := range st.held {
		for resource, info := range resources {
			pod.insert(st.uid, name, resource, info.deviceIDs, info.allocResp)
		}
	}
	inUse := map[string]sets.Set[string]{}
	for name, r := range st.resources {
		inUse[name] = r.inUse.Clone()
	}
	reusable := map[string]sets.Set[string]{}
	var steps []allocStep
	for _, c := range cs {
		for _, req := range c.requests {
			devs, err := planRequest(st, pod, inUse, reusable, c.name, req, advise)
			if err != nil {
				return nil, err
			}
			if devs == nil {
				continue // held already
			}
			steps = append(steps, allocStep{container: c.name, resource: req.resource, devices: devs})
			pod.insert(st.uid, c.name, req.resource, checkpoint.DevicesPerNUMA{nodeWithoutTopology: devs}, nil)
			inUse[req.resource].Insert(devs...)
		}
		if c.role == roleInit {
			pod.addContainerAllocatedResources(st.uid, c.name, reusable)
		} else {
			pod.removeContainerAllocatedResources(st.uid, c.name, reusable)
		}
	}
	return steps, nil
}

// planRequest chooses the devices of one request, nil when the container
// holds them already.
func planRequest(st allocState, pod podDevices, inUse, reusable map[string]sets.Set[string],
	contName string, req deviceRequest, advise adviser) ([]string, error) {
	if have := pod.containerDevices(st.uid, contName, req.resource); have != nil {
		if have.Len() != req.count {
			return nil, fmt.Errorf("container %s changed its request for %s from %d to %d", contName, req.resource, have.Len(), req.count)
		}
		return nil, nil
	}
	r, known := st.resources[req.resource]
	if !known || !r.connected || !r.listed {
		return nil, &NotReadyError{Resource: req.resource, Known: known, Unlisted: r.connected}
	}
	ch, err := chooseFrom(req.resource, req.count, reusable[req.resource], r.healthy.Difference(inUse[req.resource]))
	if err != nil {
		return nil, err
	}
	var preferred []string
	if r.preferred && ch.needsPreference() && advise != nil {
		preferred = advise(adviceQuery{
			container: contName, resource: req.resource,
			available:   sets.List(ch.available.Union(sets.New(ch.reused...))),
			mustInclude: ch.reused, size: req.count,
		})
	}
	return ch.finish(preferred), nil
}
