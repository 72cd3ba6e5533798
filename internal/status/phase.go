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
	pendingInit, failedInit := 0, 0
	pendingSidecars := 0
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0

	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		st, ok := findStatus(statuses, c.Name)
		if isSidecar(c) {
			switch {
			case !ok:
				unknown++
			case st.State.Running != nil:
				if st.Started == nil || !*st.Started {
					pendingSidecars++
				}
				running++
			case st.State.Terminated != nil:
				// A stopped sidecar does not count towards the phase.
			case st.State.Waiting != nil:
				if st.LastTerminationState.Terminated == nil {
					pendingSidecars++
					waiting++
				}
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		switch {
		case !ok || st.State.Running != nil:
			pendingInit++
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case st.State.Waiting != nil:
			if last := st.LastTerminationState.Terminated; last == nil {
				pendingInit++
			} else if last.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}

	for i := range spec.Containers {
		st, ok := findStatus(statuses, spec.Containers[i].Name)
		switch {
		case !ok:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInit > 0 && spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !podHasInitialized), waiting > 0:
		// Something has not started yet.
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal || spec.RestartPolicy != v1.RestartPolicyAlways {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			if podIsTerminal || spec.RestartPolicy == v1.RestartPolicyNever {
				return v1.PodFailed
			}
		}
		// Always, or OnFailure with a failure: restarting.
		return v1.PodRunning
	default:
		return v1.PodPending
	}
}
