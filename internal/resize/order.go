package resize

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/berth-dev/berth/internal/cm"
)

// Running is a running container of the pod, as a resize sees it.
type Running struct {
	Name, ID string
	// Index is its index in the spec's containers, or init containers
	// when Init.
	Index int
	Init  bool
}

// Update is one container's resources to change in place.
type Update struct {
	Name, ID         string
	Desired, Current Values
}

// Restart is a container whose resizePolicy asks for a restart.
type Restart struct {
	Name, ID string
	Index    int
	Init     bool
	// Message is the kubelet's reason for the kill.
	Message string
}

// Actions are what a resize asks of the running containers: per resource,
// the in-place updates in the order to apply them (decreases first, then
// increases), and the containers to restart.
type Actions struct {
	Update  map[v1.ResourceName][]Update
	Restart []Restart
}

// Idle reports whether nothing is to be done.
func (a Actions) Idle() bool { return len(a.Update) == 0 && len(a.Restart) == 0 }

// ComputeActions compares, for each running container, the resources
// allocated to it (allocated: the pod with its allocation) with those
// actuated, and decides by its resizePolicy (the kubelet's
// computePodResizeAction): a resource whose policy is RestartContainer
// restarts the container with its new resources; otherwise the memory
// (limit, else request) and cpu (limit, else request) are updated in
// place. A container without an actuated record counts as actuated at
// zero, as the kubelet's does.
func ComputeActions(allocated *v1.Pod, actuated Allocation, running []Running) Actions {
	a := Actions{Update: map[v1.ResourceName][]Update{}}
	for _, r := range running {
		c := containerOf(allocated, r)
		if c == nil {
			continue
		}
		desired, current := ValuesOf(c.Resources), ValuesOf(actuated[r.Name])
		if desired == current {
			continue
		}
		memLim, rMemLim := policy(c, v1.ResourceMemory, desired.MemoryLimit, current.MemoryLimit)
		memReq, rMemReq := policy(c, v1.ResourceMemory, desired.MemoryRequest, current.MemoryRequest)
		cpuLim, rCPULim := policy(c, v1.ResourceCPU, desired.CPULimit, current.CPULimit)
		cpuReq, rCPUReq := policy(c, v1.ResourceCPU, desired.CPURequest, current.CPURequest)
		if rMemLim || rMemReq || rCPULim || rCPUReq {
			a.Restart = append(a.Restart, Restart{Name: r.Name, ID: r.ID, Index: r.Index, Init: r.Init,
				Message: fmt.Sprintf("Container %s resize requires restart", r.Name)})
			continue
		}
		u := Update{Name: r.Name, ID: r.ID, Desired: desired, Current: current}
		switch {
		case memLim:
			a.add(v1.ResourceMemory, u, desired.MemoryLimit, current.MemoryLimit)
		case memReq:
			a.add(v1.ResourceMemory, u, desired.MemoryRequest, current.MemoryRequest)
		}
		switch {
		case cpuLim:
			a.add(v1.ResourceCPU, u, desired.CPULimit, current.CPULimit)
		case cpuReq:
			a.add(v1.ResourceCPU, u, desired.CPURequest, current.CPURequest)
		}
	}
	if len(a.Update) == 0 {
		a.Update = nil
	}
	return a
}

// add puts a decrease before the updates already listed and an increase
// after them, so that the node never holds more than before or after.
func (a *Actions) add(name v1.ResourceName, u Update, desired, current int64) {
	switch {
	case desired > current:
		a.Update[name] = append(a.Update[name], u)
	case desired < current:
		a.Update[name] = append([]Update{u}, a.Update[name]...)
	}
}

// policy is whether a resource changes and whether its resizePolicy asks
// for a restart for it; without a policy it is NotRequired.
func policy(c *v1.Container, name v1.ResourceName, desired, current int64) (resize, restart bool) {
	if desired == current {
		return false, false
	}
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return true, p.RestartPolicy == v1.RestartContainer
		}
	}
	return true, false
}

func containerOf(pod *v1.Pod, r Running) *v1.Container {
	list := pod.Spec.Containers
	if r.Init {
		list = pod.Spec.InitContainers
	}
	if r.Index < 0 || r.Index >= len(list) || list[r.Index].Name != r.Name {
		return nil
	}
	return &list[r.Index]
}

// StepKind is one kind of write of a resize.
type StepKind string

const (
	// StepPodLimit writes the pod cgroup's limit of the resource (memory
	// limit; cpu quota and period).
	StepPodLimit StepKind = "PodLimit"
	// StepPodRequest writes the pod cgroup's cpu.shares (memory requests
	// are not written to cgroups).
	StepPodRequest StepKind = "PodRequest"
	// StepContainers calls UpdateContainerResources for the resource's
	// updates, in their order.
	StepContainers StepKind = "Containers"
)

// Step is one write of a resize, in the order Order gives.
type Step struct {
	Resource v1.ResourceName
	Kind     StepKind
}

func (s Step) String() string { return string(s.Resource) + "/" + string(s.Kind) }

// Order lists the writes of a resize (the kubelet's doPodResizeAction):
// memory, then cpu; for each, a pod cgroup value that grows is written
// before the containers and one that shrinks after them, the limit grown
// before the request and shrunk after it. cur and next are the pod
// cgroup's values before and after; restart is set when a container is
// restarted for the resize, which changes the pod cgroup too. A next
// value the pod does not set keeps the current one (the kubelet cannot
// remove a limit either).
func Order(a Actions, cur, next cm.ResourceConfig, restart bool) []Step {
	var out []Step
	if len(a.Update[v1.ResourceMemory]) > 0 || restart {
		curLim, nextLim := value(cur.Memory), value(next.Memory)
		if next.Memory == nil {
			nextLim = curLim
		}
		out = append(out, around(v1.ResourceMemory, curLim, nextLim, 0, 0, len(a.Update[v1.ResourceMemory]) > 0)...)
	}
	if len(a.Update[v1.ResourceCPU]) > 0 || restart {
		curLim, nextLim := value(cur.CPUQuota), value(next.CPUQuota)
		if next.CPUQuota == nil {
			nextLim = curLim
		}
		out = append(out, around(v1.ResourceCPU, curLim, nextLim, shares(cur), shares(next), len(a.Update[v1.ResourceCPU]) > 0)...)
	}
	return out
}

func around(name v1.ResourceName, curLim, nextLim, curReq, nextReq int64, containers bool) []Step {
	var out []Step
	if nextLim > curLim {
		out = append(out, Step{name, StepPodLimit})
	}
	if nextReq > curReq {
		out = append(out, Step{name, StepPodRequest})
	}
	if containers {
		out = append(out, Step{name, StepContainers})
	}
	if nextReq < curReq {
		out = append(out, Step{name, StepPodRequest})
	}
	if nextLim < curLim {
		out = append(out, Step{name, StepPodLimit})
	}
	return out
}

func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func shares(rc cm.ResourceConfig) int64 {
	if rc.CPUShares == nil {
		return 0
	}
	return int64(*rc.CPUShares)
}

// PodCgroupWrite is the part of next a step writes to the pod cgroup.
func PodCgroupWrite(s Step, next cm.ResourceConfig) cm.ResourceConfig {
	switch {
	case s.Resource == v1.ResourceMemory && s.Kind == StepPodLimit:
		return cm.ResourceConfig{Memory: next.Memory}
	case s.Resource == v1.ResourceCPU && s.Kind == StepPodLimit:
		return cm.ResourceConfig{CPUQuota: next.CPUQuota, CPUPeriod: next.CPUPeriod}
	case s.Resource == v1.ResourceCPU && s.Kind == StepPodRequest:
		return cm.ResourceConfig{CPUShares: next.CPUShares}
	}
	return cm.ResourceConfig{}
}

// Usage is the memory the pod and its containers use now, in bytes; a
// missing entry is unknown.
type Usage struct {
	Pod        *int64
	Containers map[string]int64
}

// ValidateMemory refuses a resize that would set a memory limit, of the
// pod cgroup or of a container, at or below what it uses now (the
// kubelet's validateMemoryResizeAction): the kernel would OOM-kill it, or
// the runtime refuse the write half-way through the resize.
func ValidateMemory(a Actions, cur, next cm.ResourceConfig, restart bool, usage Usage) error {
	if len(a.Update[v1.ResourceMemory]) == 0 && !restart {
		return nil
	}
	var errs []error
	if next.Memory != nil && *next.Memory > 0 && (cur.Memory == nil || *cur.Memory <= 0 || *next.Memory < *cur.Memory) {
		switch {
		case usage.Pod == nil:
			errs = append(errs, errors.New("missing pod memory usage"))
		case *usage.Pod >= *next.Memory:
			errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", *next.Memory, *usage.Pod))
		}
	}
	for _, u := range a.Update[v1.ResourceMemory] {
		if u.Desired.MemoryLimit == 0 || (u.Current.MemoryLimit != 0 && u.Desired.MemoryLimit >= u.Current.MemoryLimit) {
			continue
		}
		used, ok := usage.Containers[u.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("missing container %q memory usage", u.Name))
		case used >= u.Desired.MemoryLimit:
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", u.Name, u.Desired.MemoryLimit, used))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("cannot decrease memory limits: %w", utilerrors.NewAggregate(errs))
}
