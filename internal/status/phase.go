package status

import v1 "k8s.io/api/core/v1"

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
			n.addInit(st, ok)
		}
	}
	for i := range spec.Containers {
		st, ok := findStatus(statuses, spec.Containers[i].Name)
		n.addApp(st, ok)
	}
	return n.phase(spec.RestartPolicy, podIsTerminal, podHasInitialized)
}

// phaseCounts are the kubelet's getPhase counters.
type phaseCounts struct {
	pendingInit, failedInit, pendingSidecars      int
	unknown, running, waiting, stopped, succeeded int
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

// addInit counts a regular init container: pending until it exited 0.
func (n *phaseCounts) addInit(st *v1.ContainerStatus, ok bool) {
	switch {
	case !ok || st.State.Running != nil:
		n.pendingInit++
	case st.State.Terminated != nil:
		if st.State.Terminated.ExitCode != 0 {
			n.failedInit++
		}
	case st.State.Waiting != nil:
		if last := st.LastTerminationState.Terminated; last == nil {
			n.pendingInit++
		} else if last.ExitCode != 0 {
			n.failedInit++
		}
	default:
		n.pendingInit++
	}
}

// addApp counts a regular container.
func (n *phaseCounts) addApp(st *v1.ContainerStatus, ok bool) {
	switch {
	case !ok:
		n.unknown++
	case st.State.Running != nil:
		n.running++
	case st.State.Terminated != nil:
		n.stopped++
		if st.State.Terminated.ExitCode == 0 {
			n.succeeded++
		}
	case st.State.Waiting != nil:
		if st.LastTerminationState.Terminated != nil {
			n.stopped++
		} else {
			n.waiting++
		}
	default:
		n.unknown++
	}
}

// phase decides from the counts.
func (n *phaseCounts) phase(policy v1.RestartPolicy, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	if n.failedInit > 0 && policy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case n.pendingInit > 0 || (n.pendingSidecars > 0 && !podHasInitialized), n.waiting > 0:
		// Something has not started yet.
		return v1.PodPending
	case n.running > 0 && n.unknown == 0:
		return v1.PodRunning
	case n.running == 0 && n.stopped > 0 && n.unknown == 0:
		if podIsTerminal || policy != v1.RestartPolicyAlways {
			if n.stopped == n.succeeded {
				return v1.PodSucceeded
			}
			if podIsTerminal || policy == v1.RestartPolicyNever {
				return v1.PodFailed
			}
		}
		// Always, or OnFailure with a failure: restarting.
		return v1.PodRunning
	default:
		return v1.PodPending
	}
}
