package status

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/restartpolicy"
)

// Waiting reasons and terminated reasons the kubelet itself writes.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	reasonStatusUnknown     = "ContainerStatusUnknown"
	reasonCompleted         = "Completed"
	reasonError             = "Error"
	exitCodeUnknown         = 137
)

// listKind says which of a pod's container lists a status list is for.
type listKind int

const (
	regularList listKind = iota
	initList
	ephemeralList
)

// containerStatuses is the kubelet's convertToAPIContainerStatuses for one
// list of containers (init, regular or ephemeral), followed by the prober
// manager's ready/started bookkeeping. Init statuses keep spec order; the
// others are sorted by name, as the kubelet publishes them.
func (g *generator) containerStatuses(specs []v1.Container, previous []v1.ContainerStatus, kind listKind) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	hasInit := len(g.pod.Spec.InitContainers) > 0
	defaultReason := ReasonContainerCreating
	if hasInit {
		defaultReason = ReasonPodInitializing
	}
	old := make(map[string]*v1.ContainerStatus, len(previous))
	for i := range previous {
		old[previous[i].Name] = &previous[i]
	}

	statuses := make(map[string]*v1.ContainerStatus, len(specs))
	for _, c := range specs {
		st := &v1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultReason}}}
		if o, ok := old[c.Name]; ok {
			if o.State.Terminated != nil {
				// A finished container keeps its last word even after the
				// runtime has removed it.
				st = o.DeepCopy()
			} else {
				st.RestartCount = o.RestartCount
				st.LastTerminationState = *o.LastTerminationState.DeepCopy()
			}
		}
		statuses[c.Name] = st
	}

	g.inferVanished(specs, statuses, old, defaultReason)

	// The newest instance gives the state, the one before it the last
	// termination state.
	seen := map[string]int{}
	for i := range g.rt.Containers {
		cs := &g.rt.Containers[i]
		st, ok := statuses[cs.Name]
		if !ok || seen[cs.Name] >= 2 {
			continue
		}
		conv := g.convert(cs, specContainer(specs, cs.Name).Image, old[cs.Name])
		if seen[cs.Name] == 0 {
			statuses[cs.Name] = conv
		} else {
			st.LastTerminationState = conv.State
		}
		seen[cs.Name]++
	}

	for i := range specs {
		g.applyWaiting(&specs[i], statuses[specs[i].Name], kind)
	}
	g.applySyncError(statuses, defaultReason)

	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		st := statuses[specs[i].Name]
		g.setReadiness(&specs[i], st, kind)
		out = append(out, *st)
	}
	if kind != initList {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// inferVanished handles a container that was running at the last status but
// that the runtime no longer reports at all: it has stopped, though its exit
// is unknown. Recording that keeps the pod from falling back to Pending.
func (g *generator) inferVanished(specs []v1.Container, statuses, old map[string]*v1.ContainerStatus, defaultReason string) {
	for _, c := range specs {
		if g.rt.LatestContainer(c.Name) != nil {
			continue
		}
		o, ok := old[c.Name]
		if !ok || o.State.Terminated != nil || o.State.Running == nil {
			continue
		}
		st := statuses[c.Name]
		if st.State.Waiting == nil || st.State.Waiting.Reason != defaultReason || st.LastTerminationState.Terminated != nil {
			continue
		}
		st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
			Reason:   reasonStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
			ExitCode: exitCodeUnknown,
		}
		if !g.in.Terminating {
			st.RestartCount++
		}
	}
}

// convert turns one runtime container into an API status.
func (g *generator) convert(cs *container.ContainerStatus, image string, old *v1.ContainerStatus) *v1.ContainerStatus {
	id := g.containerID(cs.ID)
	st := &v1.ContainerStatus{
		Name:         cs.Name,
		Image:        image,
		ImageID:      cs.ImageRef,
		ContainerID:  id,
		RestartCount: int32(cs.RestartCount),
		User:         cs.User,
	}
	switch {
	case cs.State == container.StateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
	case cs.State == container.StateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    cs.ExitCode,
			Reason:      terminatedReason(cs),
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: id,
		}
	case cs.State == container.StateUnknown && old != nil && old.State.Running != nil:
		// It was running and the runtime lost track of it: report it dead
		// rather than waiting, so that a run-once pod is not run twice.
		st.State.Terminated = &v1.ContainerStateTerminated{
			Reason:   reasonStatusUnknown,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: exitCodeUnknown,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		// Created, or unknown without a running past: waiting to run.
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

// terminatedReason is the runtime's reason (containerd says Completed, Error
// or OOMKilled), or the same words derived from the exit code.
func terminatedReason(cs *container.ContainerStatus) string {
	switch {
	case cs.Reason != "":
		return cs.Reason
	case cs.ExitCode == 0:
		return reasonCompleted
	default:
		return reasonError
	}
}

// applyWaiting shows the last sync's failure on a container that is due to
// be (re)started; a terminated state moves to lastState.
func (g *generator) applyWaiting(c *v1.Container, st *v1.ContainerStatus, kind listKind) {
	latest := g.rt.LatestContainer(c.Name)
	if kind == ephemeralList && latest != nil && latest.State == container.StateExited {
		return // an ephemeral container never runs again
	}
	if kind == initList {
		// A succeeded init container is never run again.
		if latest != nil && latest.State == container.StateExited && latest.ExitCode == 0 {
			return
		}
		// The runtime may have removed an init container of an initialized
		// pod (berth's statuses are not persisted): it must have succeeded.
		if latest == nil && !isSidecar(c) && st.State.Waiting != nil && g.anyRegularContainerCreated() {
			st.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				Reason:   reasonCompleted,
				Message:  "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally",
				ExitCode: 0,
			}}
			return
		}
	}
	if !g.shouldRestart(c, latest) {
		return
	}
	w, ok := g.in.Waiting[c.Name]
	if !ok {
		return
	}
	if st.State.Terminated != nil {
		st.LastTerminationState = st.State
	}
	st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
}

// applySyncError explains a container still waiting in its default state
// with the pod-level failure that keeps it there.
func (g *generator) applySyncError(statuses map[string]*v1.ContainerStatus, defaultReason string) {
	if g.in.SyncError == nil {
		return
	}
	for _, st := range statuses {
		if w := st.State.Waiting; w != nil && w.Reason == defaultReason && w.Message == "" {
			w.Message = g.in.SyncError.Message
		}
	}
}

// shouldRestart is the kubelet's ShouldContainerBeRestarted.
func (g *generator) shouldRestart(c *v1.Container, latest *container.ContainerStatus) bool {
	if g.in.Terminating {
		return false
	}
	if latest == nil {
		return true
	}
	switch latest.State {
	case container.StateRunning:
		return false
	case container.StateUnknown, container.StateCreated:
		return true
	}
	if isSidecar(c) {
		return true
	}
	return restartpolicy.ShouldRestart(&g.pod.Spec, c, latest.ExitCode)
}

// anyRegularContainerCreated reports whether the runtime has ever created a
// regular container of the pod: then its init containers all succeeded.
func (g *generator) anyRegularContainerCreated() bool {
	for _, c := range g.pod.Spec.Containers {
		if cs := g.rt.LatestContainer(c.Name); cs != nil && cs.State != container.StateUnknown {
			return true
		}
	}
	return false
}

// setReadiness fills started and ready the way the prober manager does.
// Regular init containers are ready once they exited 0; everything else is
// ready when running, started and passing readiness.
func (g *generator) setReadiness(c *v1.Container, st *v1.ContainerStatus, kind listKind) {
	if kind == ephemeralList {
		// The prober manager leaves ephemeral containers alone: they have
		// no probes, are never ready, and report no started.
		return
	}
	id := runtimeID(st.ContainerID)
	started := st.State.Running != nil && (g.in.Started == nil || g.in.Started(id))
	st.Started = &started
	if kind == initList && !isSidecar(c) {
		st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
		return
	}
	st.Ready = started && (g.in.Ready == nil || g.in.Ready(id))
}

// isSidecar reports a restartable init container (restartPolicy: Always).
func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func specContainer(specs []v1.Container, name string) *v1.Container {
	for i := range specs {
		if specs[i].Name == name {
			return &specs[i]
		}
	}
	return nil
}

func findStatus(statuses []v1.ContainerStatus, name string) (*v1.ContainerStatus, bool) {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i], true
		}
	}
	return nil, false
}
