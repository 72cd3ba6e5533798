package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/restartpolicy"
)

// getPhase is the kubelet's getPhase: the pod phase from its container
// statuses (init and regular together), by counting what is pending,
// running, waiting, stopped and succeeded.
//
// podIsTerminal means the pod has been killed and nothing will restart: its
// stopped containers decide Succeeded or Failed whatever the restart policy.
// (The kubelet skips that for static pods only because of how their mirror
// pods are deleted, kubernetes#116484; berth has no mirror pods.)
// podHasInitialized means a regular container exists in the current sandbox,
// so restarting sidecars do not send the pod back to Pending.
func getPhase(spec *v1.PodSpec, statuses []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	var n phaseCounts
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		st, ok := findStatus(statuses, c.Name)
		if isSidecar(c) {
			n.addSidecar(st, ok)
		} else {
			n.addInit(st, ok, restarts(spec, c))
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		st, ok := findStatus(statuses, c.Name)
		n.addApp(st, ok, restarts(spec, c))
	}
	return n.phase(podIsTerminal, podHasInitialized)
}

// restarts is whether c restarts after exiting with a code, by its own
// restart rules and policy or the pod's (ContainerRestartRules, on).
func restarts(spec *v1.PodSpec, c *v1.Container) func(exitCode int32) bool {
	return func(exitCode int32) bool { return restartpolicy.ShouldRestart(spec, c, exitCode) }
}

// phaseCounts are the kubelet's getPhase counters.
type phaseCounts struct {
	pendingInit, failedInitNotRestartable, pendingSidecars int
	unknown, running, waiting, stopped, succeeded          int
	// stoppedNotRestartable are the stopped regular containers that will
	// not run again.
	stoppedNotRestartable int
}

// addSidecar counts a restartable init container: running counts as
// running (pending until started), a stopped one not at all.
func (n *phaseCounts) addSidecar(st *v1.ContainerStatus, ok bool) {
	switch {
	case !ok:
		n.unknown++
	case st.State.Running != nil:
		if st.Started == nil || !*st.Started {
			n.pendingSidecars++
		}
		n.running++
	case st.State.Terminated != nil:
		// A stopped sidecar does not count towards the phase.
	case st.State.Waiting != nil:
		if st.LastTerminationState.Terminated == nil {
			n.pendingSidecars++
			n.waiting++
		}
	default:
		n.pendingSidecars++
		n.unknown++
	}
}

// addInit counts a regular init container: pending until it exited 0; a
// failure fails the pod unless the container restarts after it.
func (n *phaseCounts) addInit(st *v1.ContainerStatus, ok bool, restarts func(int32) bool) {
	switch {
	case !ok || st.State.Running != nil:
		n.pendingInit++
	case st.State.Terminated != nil:
		if code := st.State.Terminated.ExitCode; code != 0 && !restarts(code) {
			n.failedInitNotRestartable++
		}
	case st.State.Waiting != nil:
		if last := st.LastTerminationState.Terminated; last == nil {
			n.pendingInit++
		} else if last.ExitCode != 0 && !restarts(last.ExitCode) {
			n.failedInitNotRestartable++
		}
	default:
		n.pendingInit++
	}
}

// addApp counts a regular container.
func (n *phaseCounts) addApp(st *v1.ContainerStatus, ok bool, restarts func(int32) bool) {
	switch {
	case !ok:
		n.unknown++
	case st.State.Running != nil:
		n.running++
	case st.State.Terminated != nil:
		n.stopped++
		code := st.State.Terminated.ExitCode
		if !restarts(code) {
			n.stoppedNotRestartable++
		}
		if code == 0 {
			n.succeeded++
		}
	case st.State.Waiting != nil:
		if last := st.LastTerminationState.Terminated; last != nil {
			// As in the kubelet, a container waiting to restart counts as
			// stopped but never as succeeded.
			n.stopped++
			if !restarts(last.ExitCode) {
				n.stoppedNotRestartable++
			}
		} else {
			n.waiting++
		}
	default:
		n.unknown++
	}
}

// phase decides from the counts, as the kubelet does with
// ContainerRestartRules on: each container's own restart decision, not the
// pod's policy, says whether a stopped container is restarting.
func (n *phaseCounts) phase(podIsTerminal, podHasInitialized bool) v1.PodPhase {
	if n.failedInitNotRestartable > 0 {
		return v1.PodFailed
	}
	switch {
	case n.pendingInit > 0 || (n.pendingSidecars > 0 && !podHasInitialized), n.waiting > 0:
		// Something has not started yet.
		return v1.PodPending
	case n.running > 0 && n.unknown == 0:
		return v1.PodRunning
	case n.running == 0 && n.stopped > 0 && n.unknown == 0:
		if !podIsTerminal && n.stopped != n.stoppedNotRestartable {
			// At least one container is restarting.
			return v1.PodRunning
		}
		if n.stopped == n.succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}
