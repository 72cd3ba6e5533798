package podworker

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/restartpolicy"
)

// Plan is what one sync must do to move a pod's runtime state toward its
// spec. It is computed by ComputePlan, a pure function, and carried out by
// the worker; the split follows the kubelet's computePodActions/SyncPod.
type Plan struct {
	// KillPod stops every container and the sandbox before anything else.
	KillPod bool
	// CreateSandbox creates a new sandbox with SandboxAttempt.
	CreateSandbox  bool
	SandboxID      string
	SandboxAttempt uint32
	// StartInit lists the indexes of the init containers to start, in
	// spec order: the next regular init container and the sidecars
	// (restartable init containers) that need (re)starting.
	StartInit []int
	// Start lists the indexes of the app containers to start.
	Start []int
	// StartEphemeral lists the indexes of the ephemeral containers to
	// start: those the runtime has never seen.
	StartEphemeral []int
	// Kill lists running containers to stop, with why.
	Kill []Kill
}

// Kill is one container to stop.
type Kill struct {
	ID, Name string
	Reason   string
	// GracePeriod overrides the pod's terminationGracePeriodSeconds: a
	// probe may set its own for the kills it causes.
	GracePeriod *int64
}

// Idle reports whether the plan asks for nothing: the pod is as its spec
// wants it.
func (p Plan) Idle() bool {
	return !p.KillPod && !p.CreateSandbox && len(p.StartInit) == 0 && len(p.Start) == 0 &&
		len(p.StartEphemeral) == 0 && len(p.Kill) == 0
}

func (p Plan) String() string {
	return fmt.Sprintf("killPod=%v createSandbox=%v(attempt %d) startInit=%v start=%v startEphemeral=%v kill=%d",
		p.KillPod, p.CreateSandbox, p.SandboxAttempt, p.StartInit, p.Start, p.StartEphemeral, len(p.Kill))
}

// ProbeResults is what a plan reads of the probes: which probe, if any,
// condemned a running container ("liveness" or "startup", else ""), and
// whether a container with a startup probe has passed it. The worker's
// Probes is one; nil means no probe ever ran.
type ProbeResults interface {
	Failed(containerID string) string
	Started(containerID string) bool
}

// ComputePlan decides, from the pod's spec, what the runtime reports and the
// probes' results, which sandbox and containers to create, start or stop.
// It implements the kubelet's rules (computePodActions): init containers
// one at a time in order, sidecars started in their place and kept running
// (computeInitActions), app containers by restart policy once the pod is
// initialized, a container whose liveness or startup probe failed is killed
// (and restarted unless the policy is Never), and a new sandbox (killing the
// old) when the sandbox is gone or lost its network.
func ComputePlan(pod *v1.Pod, st *container.PodStatus, probes ProbeResults) Plan {
	plan := Plan{}
	createSandbox, attempt, sandboxID := sandboxChanged(pod, st)
	plan.KillPod, plan.CreateSandbox = createSandbox, createSandbox
	plan.SandboxAttempt, plan.SandboxID = attempt, sandboxID

	if createSandbox {
		return sandboxPlan(pod, st, plan)
	}
	if appContainersFinished(pod, st) {
		// The pod's phase is terminal: stop it, sidecars included, as the
		// kubelet stops a terminal pod before it looks at init containers.
		plan.KillPod = true
		return plan
	}
	plan.StartEphemeral = ephemeralToStart(pod, st)
	if !computeInitActions(pod, st, probes, &plan) || plan.KillPod {
		// Initialization failed or is still in progress: app containers
		// wait for it.
		return plan
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := st.LatestContainer(c.Name)
		if cs == nil || cs.State != container.StateRunning {
			if shouldRestart(pod, c, st) {
				plan.Start = append(plan.Start, i)
				if cs != nil && (cs.State == container.StateUnknown || cs.State == container.StateCreated) {
					plan.Kill = append(plan.Kill, Kill{ID: cs.ID, Name: cs.Name, Reason: "container in state " + string(cs.State) + " is replaced"})
				}
			}
			continue
		}
		reason := ""
		var grace *int64
		if want := kuberuntime.ContainerHash(c); cs.Hash != "" && cs.Hash != want {
			reason = "container spec changed"
		} else if probe := failedProbe(probes, cs.ID); probe != "" {
			reason = fmt.Sprintf("Container %s failed %s probe", c.Name, probe)
			grace = probeGracePeriod(c, probe)
		}
		if reason == "" {
			keep++
			continue
		}
		if restartpolicy.RestartsWhileRunning(&pod.Spec, c) {
			plan.Start = append(plan.Start, i)
			reason += ", will be restarted"
		}
		plan.Kill = append(plan.Kill, Kill{ID: cs.ID, Name: cs.Name, Reason: reason, GracePeriod: grace})
	}
	if keep == 0 && len(plan.Start) == 0 {
		// Sidecars do not keep a pod alive: they are stopped with it and
		// not restarted.
		plan.KillPod = true
		plan.StartInit, plan.StartEphemeral = nil, nil
	}
	return plan
}

// sandboxPlan completes the plan of a pod that needs a new sandbox: the
// first init container, or every app container the policy still runs.
func sandboxPlan(pod *v1.Pod, st *container.PodStatus, plan Plan) Plan {
	if !restartsOnFailure(pod) && plan.SandboxAttempt != 0 && len(st.Containers) != 0 {
		// The sandbox died after its containers ran and the pod never
		// restarts: leave it dead, as the kubelet does.
		plan.CreateSandbox = false
		return plan
	}
	for i := range pod.Spec.Containers {
		if restartpolicy.RunsOnce(&pod.Spec, &pod.Spec.Containers[i]) && succeeded(st, pod.Spec.Containers[i].Name) {
			continue
		}
		plan.Start = append(plan.Start, i)
	}
	if len(plan.Start) == 0 {
		plan.CreateSandbox = false
		return plan
	}
	if len(pod.Spec.InitContainers) != 0 {
		plan.StartInit, plan.Start = []int{0}, nil
	}
	return plan
}

// ephemeralToStart lists the ephemeral containers never run yet. They start
// even while the pod initializes, and never again once they ran
// (computePodActions).
func ephemeralToStart(pod *v1.Pod, st *container.PodStatus) []int {
	if pod.DeletionTimestamp != nil {
		return nil
	}
	var out []int
	for i := range pod.Spec.EphemeralContainers {
		if st.LatestContainer(pod.Spec.EphemeralContainers[i].Name) == nil {
			out = append(out, i)
		}
	}
	return out
}

// appContainersFinished reports that every app container has exited and
// none will be restarted by its restart policy, rules or the pod's policy.
func appContainersFinished(pod *v1.Pod, st *container.PodStatus) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if restartpolicy.AlwaysRestarts(&pod.Spec, c) {
			return false
		}
		cs := st.LatestContainer(c.Name)
		if cs == nil || cs.State != container.StateExited || shouldRestart(pod, c, st) {
			return false
		}
	}
	return true
}

func failedProbe(probes ProbeResults, id string) string {
	if probes == nil {
		return ""
	}
	return probes.Failed(id)
}

// sandboxChanged reports whether the pod needs a new sandbox, with the
// attempt number for it and the ID of the newest existing one.
func sandboxChanged(pod *v1.Pod, st *container.PodStatus) (bool, uint32, string) {
	switch st.SandboxChange(pod.Spec.HostNetwork) {
	case "":
		return false, st.Sandboxes[0].Attempt, st.Sandboxes[0].ID
	case container.SandboxMissing:
		return true, 0, ""
	}
	return true, st.Sandboxes[0].Attempt + 1, st.Sandboxes[0].ID
}

func initFailed(cs *container.ContainerStatus) bool {
	switch {
	case cs.Reason == "OOMKilled":
		return true
	case cs.State == container.StateExited && cs.ExitCode != 0:
		return true
	case cs.State == container.StateUnknown:
		return true
	}
	return false
}

func restartsOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

func succeeded(st *container.PodStatus, name string) bool {
	cs := st.LatestContainer(name)
	return cs != nil && cs.State == container.StateExited && cs.ExitCode == 0
}

// shouldRestart is the kubelet's ShouldContainerBeRestarted: an exited
// container by its restart rules and policy, else the pod's.
func shouldRestart(pod *v1.Pod, c *v1.Container, st *container.PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	cs := st.LatestContainer(c.Name)
	if cs == nil {
		return true
	}
	switch cs.State {
	case container.StateRunning:
		return false
	case container.StateUnknown, container.StateCreated:
		return true
	}
	return restartpolicy.ShouldRestart(&pod.Spec, c, cs.ExitCode)
}

// probeGracePeriod is the probe-level terminationGracePeriodSeconds of the
// probe that condemned c, if it sets one.
func probeGracePeriod(c *v1.Container, probe string) *int64 {
	p := c.LivenessProbe
	if probe == "startup" {
		p = c.StartupProbe
	}
	if p == nil {
		return nil
	}
	return p.TerminationGracePeriodSeconds
}
