package podworker

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/restartpolicy"
)

// computeInitActions adds to plan the init containers to start or stop and
// reports whether the pod is initialized, so that its app containers may
// run. It is the kubelet's computeInitContainerActions with sidecars
// (KEP-753):
//
//   - regular init containers run one at a time, in order, each once;
//   - a sidecar (restartPolicy Always) counts as done once it runs and, if
//     it has a startup probe, has passed it; the next init container starts
//     then, and the sidecar keeps running beside the app containers;
//   - a sidecar that exits, fails its startup or liveness probe, or whose
//     spec changed is restarted, before and after initialization;
//   - a regular init container that failed is retried, unless the pod's
//     policy is Never: then the pod is killed.
//
// The loop walks the init containers backwards: finished ones may have been
// removed from the runtime, so the newest one with a status says how far
// initialization got; everything before it is initialized.
func computeInitActions(pod *v1.Pod, st *container.PodStatus, probes ProbeResults, plan *Plan) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	initialized := appContainerCreated(pod, st)
	previouslyInitialized := initialized
	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := isSidecar(c)
		cs := st.LatestContainer(c.Name)
		if cs == nil {
			// Gone from the runtime after initialization: only a sidecar
			// must come back.
			if previouslyInitialized && sidecar {
				plan.StartInit = append(plan.StartInit, i)
			}
			continue
		}
		if previouslyInitialized && !sidecar {
			continue // ran once, never again
		}
		switch cs.State {
		case container.StateCreated:
			// Created and started go together: one left created failed to
			// start, and is replaced rather than left stuck.
			plan.Kill = append(plan.Kill, Kill{ID: cs.ID, Name: cs.Name, Reason: "init container in state created is replaced"})
			plan.StartInit = append(plan.StartInit, i)
		case container.StateRunning:
			if sidecar && sidecarStarted(c, cs, probes, plan, i) {
				if i == len(inits)-1 {
					initialized = true
				} else if !previouslyInitialized {
					plan.StartInit = append(plan.StartInit, i+1)
				}
				checkRunningSidecar(c, cs, probes, plan, i)
			}
			// A regular init container that runs is waited for.
		case container.StateExited:
			switch {
			case sidecar:
				plan.StartInit = append(plan.StartInit, i)
			case initFailed(cs):
				if !shouldRestart(pod, c, st) {
					plan.KillPod, plan.StartInit = true, nil
					return false
				}
				plan.StartInit = append(plan.StartInit, i)
			case i == len(inits)-1:
				initialized = true
			default:
				plan.StartInit = append(plan.StartInit, i+1)
			}
		default: // unknown: it cannot be trusted to have finished
			if !sidecar && !restartpolicy.RestartsWhileRunning(&pod.Spec, c) {
				plan.KillPod, plan.StartInit = true, nil
				return false
			}
			plan.Kill = append(plan.Kill, Kill{ID: cs.ID, Name: cs.Name, Reason: "init container in unknown state"})
			plan.StartInit = append(plan.StartInit, i)
		}
		previouslyInitialized = true
	}
	if !previouslyInitialized {
		plan.StartInit = append(plan.StartInit, 0)
	}
	// Collected backwards; started in spec order.
	slices.Reverse(plan.StartInit)
	return initialized
}

// sidecarStarted reports whether a running sidecar has started: it has no
// startup probe, or passed it. One that failed it is killed and restarted.
func sidecarStarted(c *v1.Container, cs *container.ContainerStatus, probes ProbeResults, plan *Plan, i int) bool {
	if c.StartupProbe == nil || probes == nil {
		return true
	}
	if probes.Started(cs.ID) {
		return true
	}
	if probes.Failed(cs.ID) == "startup" {
		plan.Kill = append(plan.Kill, Kill{ID: cs.ID, Name: c.Name,
			Reason: fmt.Sprintf("Init container %s failed startup probe", c.Name), GracePeriod: probeGracePeriod(c, "startup")})
		plan.StartInit = append(plan.StartInit, i)
	}
	return false
}

// checkRunningSidecar restarts a started sidecar whose spec changed or whose
// liveness probe failed. Its liveness does not hold back the next init
// container, as in the kubelet.
func checkRunningSidecar(c *v1.Container, cs *container.ContainerStatus, probes ProbeResults, plan *Plan, i int) {
	reason := ""
	var grace *int64
	if want := kuberuntime.ContainerHash(c); cs.Hash != "" && cs.Hash != want {
		reason = "Init container spec hash changed"
	} else if failedProbe(probes, cs.ID) == "liveness" {
		reason = fmt.Sprintf("Init container %s failed liveness probe", c.Name)
		grace = probeGracePeriod(c, "liveness")
	}
	if reason == "" {
		return
	}
	plan.Kill = append(plan.Kill, Kill{ID: cs.ID, Name: c.Name, Reason: reason, GracePeriod: grace})
	plan.StartInit = append(plan.StartInit, i)
}

// appContainerCreated reports an app container created or running in the
// runtime: then every init container ran at some point, even if the runtime
// no longer has it. Exited ones do not count: after a node reboot every
// container is exited and the new sandbox must be initialized afresh.
func appContainerCreated(pod *v1.Pod, st *container.PodStatus) bool {
	for i := range pod.Spec.Containers {
		cs := st.LatestContainer(pod.Spec.Containers[i].Name)
		if cs != nil && (cs.State == container.StateRunning || cs.State == container.StateCreated) {
			return true
		}
	}
	return false
}

// isSidecar reports a restartable init container (restartPolicy Always).
func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
