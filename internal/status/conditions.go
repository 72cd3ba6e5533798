package status

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons, the kubelet's words.
const (
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// conditions returns the kubelet-owned conditions in the kubelet's order,
// each with its transition time carried over from the previous status while
// its status is unchanged.
func (g *generator) conditions(all []v1.ContainerStatus, phase v1.PodPhase) []v1.PodCondition {
	pod := g.pod
	out := []v1.PodCondition{
		g.readyToStartContainers(),
		initializedCondition(pod, all, phase),
	}
	out = append(out,
		podReadyCondition(pod, out, all, phase),
		containersReadyCondition(pod, all, phase),
		// A static pod is scheduled by definition.
		v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	)
	for i := range out {
		out[i].LastTransitionTime = transitionTime(out[i], g.old.Conditions, g.in.Now)
		out[i].ObservedGeneration = pod.Generation
	}
	return out
}

// transitionTime keeps the previous transition time while the condition's
// status holds, as the kubelet's status manager does.
func transitionTime(c v1.PodCondition, previous []v1.PodCondition, now time.Time) metav1.Time {
	for _, p := range previous {
		if p.Type == c.Type && p.Status == c.Status {
			return p.LastTransitionTime
		}
	}
	return metav1.NewTime(now)
}

// readyToStartContainers is True once a sandbox with networking exists. When
// it is not, berth names the sync's failure if there was one, else why a new
// sandbox is needed.
func (g *generator) readyToStartContainers() v1.PodCondition {
	why := g.rt.SandboxChange(g.pod.Spec.HostNetwork)
	if why == "" {
		return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	}
	c := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse,
		Reason: ReasonPodSandboxNotReady, Message: why}
	if e := g.in.SyncError; e != nil {
		c.Reason, c.Message = e.Reason, e.Message
	}
	return c
}

// initializedCondition is True when every init container has succeeded (or,
// for a sidecar, started), or once any regular container has run.
func initializedCondition(pod *v1.Pod, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		st, ok := findStatus(all, ic.Name)
		switch {
		case !ok:
			unknown = append(unknown, ic.Name)
		case isSidecar(ic) && (st.Started == nil || !*st.Started), !isSidecar(ic) && !st.Ready:
			incomplete = append(incomplete, ic.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		c.Reason = ReasonPodCompleted
		return c
	}
	if anyRegularContainerStarted(pod, all) {
		return c
	}
	if msg := joinMessages(list("containers with unknown status", unknown), list("containers with incomplete status", incomplete)); msg != "" {
		c.Status, c.Reason, c.Message = v1.ConditionFalse, ReasonContainersNotInitialized, msg
	}
	return c
}

// containersReadyCondition is True when every regular container and sidecar
// is ready; a terminal pod is never ready.
func containersReadyCondition(pod *v1.Pod, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	var unknown, unready []string
	check := func(name string) {
		if st, ok := findStatus(all, name); !ok {
			unknown = append(unknown, name)
		} else if !st.Ready {
			unready = append(unready, name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			check(pod.Spec.InitContainers[i].Name)
		}
	}
	for i := range pod.Spec.Containers {
		check(pod.Spec.Containers[i].Name)
	}
	switch {
	case phase == v1.PodSucceeded && len(unknown) == 0:
		c.Status, c.Reason = v1.ConditionFalse, ReasonPodCompleted
	case phase == v1.PodFailed:
		c.Status, c.Reason = v1.ConditionFalse, ReasonPodFailed
	default:
		if msg := joinMessages(list("containers with unknown status", unknown), list("containers with unready status", unready)); msg != "" {
			c.Status, c.Reason, c.Message = v1.ConditionFalse, ReasonContainersNotReady, msg
		}
	}
	return c
}

// podReadyCondition is ContainersReady, further held back by readiness
// gates whose conditions are missing or not True.
func podReadyCondition(pod *v1.Pod, conds []v1.PodCondition, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := containersReadyCondition(pod, all, phase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, gate := range pod.Spec.ReadinessGates {
		// A gate's condition is someone else's: it is in the pod's status as
		// the API server has it, unless it is one of the kubelet's own.
		c := findCondition(conds, gate.ConditionType)
		if c == nil {
			c = findCondition(pod.Status.Conditions, gate.ConditionType)
		}
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(gate.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(gate.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse,
			Reason: ReasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// anyRegularContainerStarted reports a regular container running or
// terminated: the pod has been initialized at some point.
func anyRegularContainerStarted(pod *v1.Pod, all []v1.ContainerStatus) bool {
	for i := range pod.Spec.Containers {
		if st, ok := findStatus(all, pod.Spec.Containers[i].Name); ok && (st.State.Running != nil || st.State.Terminated != nil) {
			return true
		}
	}
	return false
}

func findCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// list renders names the kubelet's way: "containers with unready status: [a b]".
func list(what string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s", what, names)
}

func joinMessages(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ", ")
}
