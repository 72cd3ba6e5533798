package main

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// nodeUnreachablePodReason is the pod reason the node controller sets on
// pods of a node that stopped answering; kubectl shows such pods as Unknown.
const nodeUnreachablePodReason = "NodeLost"

// podRow is one line of `berth pods`.
type podRow struct {
	Namespace string
	Name      string
	Ready     string
	Status    string
	Restarts  string
	Age       string
	IP        string
	Node      string
}

// podRowFor computes a pod's columns by kubectl's rules for `get pods`, so
// the two read the same: STATUS is the most telling reason among the pod's
// and its containers', RESTARTS adds the time of the last restart. AGE is
// counted from status.startTime, when berth started the pod, falling back
// to the creation time.
func podRowFor(pod *v1.Pod, now time.Time) podRow {
	restarts := 0
	restartableInitRestarts := 0
	totalContainers := len(pod.Spec.Containers)
	readyContainers := 0
	var lastRestart, lastRestartableInitRestart time.Time

	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == v1.PodScheduled && cond.Reason == v1.PodReasonSchedulingGated {
			reason = v1.PodReasonSchedulingGated
		}
	}

	initSpecs := make(map[string]*v1.Container, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		initSpecs[c.Name] = c
		if isRestartableInitContainer(c) {
			// A sidecar counts among the pod's containers.
			totalContainers++
		}
	}

	initializing := false
	for i := range pod.Status.InitContainerStatuses {
		cs := &pod.Status.InitContainerStatuses[i]
		restarts += int(cs.RestartCount)
		lastRestart = later(lastRestart, cs.LastTerminationState.Terminated)
		sidecar := isRestartableInitContainer(initSpecs[cs.Name])
		if sidecar {
			restartableInitRestarts += int(cs.RestartCount)
			lastRestartableInitRestart = later(lastRestartableInitRestart, cs.LastTerminationState.Terminated)
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case sidecar && cs.Started != nil && *cs.Started:
			if cs.Ready {
				readyContainers++
			}
			continue
		case cs.State.Terminated != nil:
			reason = "Init:" + terminatedReason(cs.State.Terminated)
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		// The first init container that has not succeeded tells the story.
		initializing = true
		break
	}

	if !initializing || podConditionTrue(pod, v1.PodInitialized) {
		// Restarts of init containers that ran to completion are history;
		// sidecars keep counting.
		restarts = restartableInitRestarts
		lastRestart = lastRestartableInitRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := &pod.Status.ContainerStatuses[i]
			restarts += int(cs.RestartCount)
			lastRestart = later(lastRestart, cs.LastTerminationState.Terminated)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				reason = terminatedReason(cs.State.Terminated)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				readyContainers++
			}
		}
		// A finished container does not make a pod with running ones look
		// completed.
		if reason == "Completed" && hasRunning {
			if podConditionTrue(pod, v1.PodReady) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		switch {
		case pod.Status.Reason == nodeUnreachablePodReason:
			reason = "Unknown"
		case pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed:
			reason = "Terminating"
		}
	}

	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", restarts, since(lastRestart, now))
	}

	started := pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil {
		started = pod.Status.StartTime.Time
	}

	ip := pod.Status.PodIP
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}

	return podRow{
		Namespace: pod.Namespace,
		Name:      pod.Name,
		Ready:     fmt.Sprintf("%d/%d", readyContainers, totalContainers),
		Status:    reason,
		Restarts:  restartsCell,
		Age:       since(started, now),
		IP:        orNone(ip),
		Node:      orNone(pod.Spec.NodeName),
	}
}

// terminatedReason names how a container ended: its reason, else its
// signal, else its exit code.
func terminatedReason(t *v1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

func isRestartableInitContainer(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func podConditionTrue(pod *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// later returns the later of t and the end of a termination.
func later(t time.Time, term *v1.ContainerStateTerminated) time.Time {
	if term != nil && term.FinishedAt.After(t) {
		return term.FinishedAt.Time
	}
	return t
}

// since formats an age the way kubectl does.
func since(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// readinessGates is kubectl's READINESS GATES cell: how many of the pod's
// readiness gates have their condition true, or <none>.
func readinessGates(pod *v1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	ready := 0
	for _, gate := range pod.Spec.ReadinessGates {
		if podConditionTrue(pod, gate.ConditionType) {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(pod.Spec.ReadinessGates))
}
