package podworker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/resize"
)

// The kubelet's resize event reasons (pkg/kubelet/events).
const (
	eventResizeStarted    = "ResizeStarted"
	eventResizeDeferred   = "ResizeDeferred"
	eventResizeInfeasible = "ResizeInfeasible"
	eventResizeError      = "ResizeError"
)

// ResourceUpdater is a Runtime that can change a running container's
// resources (*runtime.Service is one); without it no resize is applied.
type ResourceUpdater interface {
	UpdateContainerResources(ctx context.Context, id string, r *runtimeapi.LinuxContainerResources) error
}

// PodCgroupResizer is PodCgroups that can resize a pod's cgroup
// (*hierarchy.Hierarchy is one).
type PodCgroupResizer interface {
	ResizePod(pod *v1.Pod, cfg cm.ResourceConfig) error
	// MemoryUsage is the pod cgroup's usage, or that of the container
	// containerID in it.
	MemoryUsage(pod *v1.Pod, containerID string) (int64, error)
}

// resizeAllocate admits the pod's pending resize, if any, and returns the
// pod with its allocated resources, which the rest of the sync runs: a
// resize not admitted changes nothing.
func (w *worker) resizeAllocate(pod *v1.Pod, log *slog.Logger) *v1.Pod {
	d := w.ws.deps
	if d.Resize == nil {
		return pod
	}
	alloc, out, err := d.Resize.Sync(pod, resize.Node{Allocatable: d.NodeAllocatable})
	if err != nil {
		log.Warn("resize checkpoint", "err", err)
	}
	switch {
	case out.Started:
		log.Info("resize admitted", "generation", pod.Generation)
		w.event(pod, v1.EventTypeNormal, eventResizeStarted,
			fmt.Sprintf("Pod resize started: %s", resourcesSummary(pod)))
	case out.Pending != nil && w.resizePending != *out.Pending:
		reason := eventResizeDeferred
		if out.Pending.Reason == resize.ReasonInfeasible {
			reason = eventResizeInfeasible
		}
		log.Info("resize not admitted", "reason", out.Pending.Reason, "message", out.Pending.Message)
		w.event(pod, v1.EventTypeWarning, reason, fmt.Sprintf("Pod resize %s: %s", out.Pending.Reason, out.Pending.Message))
	}
	if out.Pending != nil {
		w.resizePending = *out.Pending
	} else {
		w.resizePending = resize.Verdict{}
	}
	return alloc
}

// resourcesSummary is the containers' requests and limits, for events.
func resourcesSummary(pod *v1.Pod) string {
	var s string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		s += fmt.Sprintf("%s{requests:%v limits:%v} ", c.Name, c.Resources.Requests, c.Resources.Limits)
	}
	return s
}

// runningContainers are the pod's running regular containers and sidecars.
func runningContainers(pod *v1.Pod, st *container.PodStatus) []resize.Running {
	var out []resize.Running
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if cs := st.LatestContainer(c.Name); cs != nil && cs.State == container.StateRunning && isSidecar(c) {
			out = append(out, resize.Running{Name: c.Name, ID: cs.ID, Index: i, Init: true})
		}
	}
	for i := range pod.Spec.Containers {
		if cs := st.LatestContainer(pod.Spec.Containers[i].Name); cs != nil && cs.State == container.StateRunning {
			out = append(out, resize.Running{Name: cs.Name, ID: cs.ID, Index: i})
		}
	}
	return out
}

// adoptActuated records, for a running container berth has no record of
// (or a record of an earlier instance), that it runs with its allocation:
// berth created it from the allocated pod.
func (w *worker) adoptActuated(pod *v1.Pod, running []resize.Running) map[string]resize.Actuated {
	rz := w.ws.deps.Resize
	act := rz.Actuated(pod.UID)
	for _, r := range running {
		if a, ok := act[r.Name]; ok && a.ID == r.ID {
			continue
		}
		c := specContainer(pod, r.Name)
		if c == nil {
			continue
		}
		_ = rz.SetActuated(pod.UID, r.Name, r.ID, c.Resources)
		act[r.Name] = resize.Actuated{ID: r.ID, Resources: *c.Resources.DeepCopy()}
	}
	return act
}

// resizeRunning carries out what the allocation asks of the running
// containers (the kubelet's doPodResizeAction): containers whose
// resizePolicy says RestartContainer are stopped (the plan then starts
// them with their new resources; restart lists their spec indexes), the
// others are updated in place around the pod cgroup. It reports whether
// it touched the runtime.
func (w *worker) resizeRunning(ctx context.Context, pod *v1.Pod, st *container.PodStatus, log *slog.Logger) (restart []resize.Restart, touched bool) {
	d := w.ws.deps
	if d.Resize == nil || len(st.Sandboxes) == 0 {
		return nil, false
	}
	running := runningContainers(pod, st)
	act := w.adoptActuated(pod, running)
	actuated := resize.Allocation{}
	for name, a := range act {
		actuated[name] = a.Resources
	}
	actions := resize.ComputeActions(pod, actuated, running)
	if actions.Idle() {
		_ = d.Resize.Settle(pod, true, nil)
		return nil, false
	}
	err := w.doResize(ctx, pod, actions, actuated, log)
	if err != nil {
		log.Warn("resize failed", "err", err)
		w.event(pod, v1.EventTypeWarning, eventResizeError, err.Error())
		_ = d.Resize.Settle(pod, false, err)
		return nil, true
	}
	for _, r := range actions.Restart {
		// The container is stopped; the new one is created from the
		// allocated pod, with the new resources.
		_ = d.Resize.SetActuated(pod.UID, r.Name, "", specContainer(pod, r.Name).Resources)
	}
	// Done unless a container is still to start again (the next sync,
	// which its start wakes, settles it).
	_ = d.Resize.Settle(pod, len(actions.Restart) == 0, nil)
	return actions.Restart, true
}

// doResize is the I/O of one resize: the memory check, the stops of the
// containers to restart, then the writes in resize.Order.
func (w *worker) doResize(ctx context.Context, pod *v1.Pod, actions resize.Actions, actuated resize.Allocation, log *slog.Logger) error {
	d := w.ws.deps
	updater, ok := d.Runtime.(ResourceUpdater)
	if !ok {
		return fmt.Errorf("the runtime cannot update container resources")
	}
	cg, _ := d.Cgroups.(PodCgroupResizer)
	before, _ := resize.WithAllocation(pod, actuated)
	cur, next := cm.PodResourceConfig(before, 0), cm.PodResourceConfig(pod, 0)
	restart := len(actions.Restart) > 0
	if cg != nil {
		if err := resize.ValidateMemory(actions, cur, next, restart, w.memoryUsage(cg, pod, actions)); err != nil {
			return err
		}
	}
	for _, r := range actions.Restart {
		log.Info("stopping container", "container", r.Name, "reason", r.Message)
		w.event(pod, v1.EventTypeNormal, "Killing", r.Message)
		if err := w.stopContainer(ctx, pod, r.ID, r.Name, gracePeriod(pod), log); err != nil {
			return err
		}
	}
	for _, s := range resize.Order(actions, cur, next, restart) {
		if s.Kind != resize.StepContainers {
			if cg == nil {
				continue
			}
			if err := cg.ResizePod(pod, resize.PodCgroupWrite(s, next)); err != nil {
				return fmt.Errorf("resize of the pod cgroup (%s): %w", s, err)
			}
			continue
		}
		for _, u := range actions.Update[s.Resource] {
			if err := w.updateContainer(ctx, updater, pod, u, s.Resource); err != nil {
				return err
			}
		}
	}
	return nil
}

// updateContainer applies one resource of an update: the other keeps what
// the container runs with now (updatePodContainerResources), and the
// actuated record follows each accepted call.
func (w *worker) updateContainer(ctx context.Context, updater ResourceUpdater, pod *v1.Pod, u resize.Update, name v1.ResourceName) error {
	d := w.ws.deps
	rz := d.Resize
	cur := rz.Actuated(pod.UID)[u.Name].Resources
	want := specContainer(pod, u.Name).Resources
	applied := *cur.DeepCopy()
	for _, list := range []*v1.ResourceList{&applied.Requests, &applied.Limits} {
		if *list == nil {
			*list = v1.ResourceList{}
		}
	}
	setOrDelete(applied.Requests, want.Requests, name)
	setOrDelete(applied.Limits, want.Limits, name)
	c := specContainer(pod, u.Name).DeepCopy()
	c.Resources = applied
	r, err := kuberuntime.ContainerResources(pod, c, d.NodeAllocatable.Memory().Value(), d.Memory)
	if err != nil {
		return err
	}
	if err := updater.UpdateContainerResources(ctx, u.ID, r); err != nil {
		return fmt.Errorf("UpdateContainerResources of container %q (%s): %w", u.Name, name, err)
	}
	return rz.SetActuated(pod.UID, u.Name, u.ID, applied)
}

func setOrDelete(dst, src v1.ResourceList, name v1.ResourceName) {
	if q, ok := src[name]; ok {
		dst[name] = q.DeepCopy()
		return
	}
	delete(dst, name)
}

// memoryUsage reads what ValidateMemory needs; what cannot be read is
// left out, which the check reports.
func (w *worker) memoryUsage(cg PodCgroupResizer, pod *v1.Pod, actions resize.Actions) resize.Usage {
	u := resize.Usage{Containers: map[string]int64{}}
	if v, err := cg.MemoryUsage(pod, ""); err == nil {
		u.Pod = &v
	}
	for _, up := range actions.Update[v1.ResourceMemory] {
		if v, err := cg.MemoryUsage(pod, up.ID); err == nil {
			u.Containers[up.Name] = v
		}
	}
	return u
}

// withResizeRestarts makes plan start the containers a resize stopped,
// whatever the pod's restart policy, as the kubelet's resize restart does.
func withResizeRestarts(plan Plan, restarts []resize.Restart) Plan {
	for _, r := range restarts {
		if r.Init {
			if !slices.Contains(plan.StartInit, r.Index) {
				plan.StartInit = append(plan.StartInit, r.Index)
			}
			continue
		}
		if !slices.Contains(plan.Start, r.Index) {
			plan.Start = append(plan.Start, r.Index)
		}
	}
	return plan
}
