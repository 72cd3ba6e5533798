package main

import (
	"cmp"
	"context"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// followPollInterval is how often berth logs -f looks for a container's
// next instance once the one it followed has ended.
const followPollInterval = 500 * time.Millisecond

// followStep is what berth logs -f does once the log stream of one
// container instance has ended.
type followStep int

const (
	followWait   followStep = iota // a next instance may come: look again later
	followStream                   // a next instance is there: print its log from its start
	followDone                     // no next instance will come
)

func (s followStep) String() string {
	switch s {
	case followWait:
		return "wait"
	case followStream:
		return "stream"
	case followDone:
		return "done"
	}
	return "unknown"
}

// nextInstance decides, from the pod as the local API shows it (nil: gone),
// what follows the end of the log of instance lastID ("containerd://..." as
// in the pod's status; "" when none was known) of the container: its next
// instance's ID, once there is one, or whether one can still come.
func nextInstance(pod *v1.Pod, container, lastID string) (followStep, string) {
	if pod == nil || pod.DeletionTimestamp != nil {
		return followDone, ""
	}
	cs, init := containerStatus(pod, container)
	// An instance not streamed yet is printed even when the pod has ended
	// since: it ran, and its log is part of the story.
	if cs != nil {
		if id := shownInstance(cs); id != "" && id != lastID {
			return followStream, id
		}
	}
	switch {
	case pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		return followDone, ""
	case cs == nil, cs.State.Terminated == nil:
		// Not created yet, running (the status lags behind the exit that
		// ended the stream), or waiting to restart.
		return followWait, ""
	case !willRestart(pod, container, init, cs.State.Terminated.ExitCode):
		return followDone, ""
	}
	return followWait, ""
}

// containerStatus finds the container's status and says whether it is an
// init container.
func containerStatus(pod *v1.Pod, name string) (*v1.ContainerStatus, bool) {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i], false
		}
	}
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i], true
		}
	}
	return nil, false
}

// shownInstance is the instance whose log /containerLogs shows, as berth
// picks it: the running or terminated one, or, while the container waits
// to restart, the last one.
func shownInstance(cs *v1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return cs.ContainerID
	case cs.State.Terminated != nil:
		return cmp.Or(cs.State.Terminated.ContainerID, cs.ContainerID)
	case cs.LastTerminationState.Terminated != nil:
		return cs.LastTerminationState.Terminated.ContainerID
	}
	return ""
}

// willRestart says whether a container that exited with exitCode is
// started again, by the kubelet's rules: its own restart policy (a sidecar
// init container's Always), else the pod's, where init containers never
// run again after they succeeded.
func willRestart(pod *v1.Pod, name string, init bool, exitCode int32) bool {
	policy := pod.Spec.RestartPolicy
	if spec := podContainer(pod, name); spec != nil && spec.RestartPolicy != nil {
		policy = v1.RestartPolicy(*spec.RestartPolicy)
	} else if init && policy == v1.RestartPolicyAlways {
		policy = v1.RestartPolicyOnFailure
	}
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// logAPI is what following a log needs of the local API: apiClient.
type logAPI interface {
	pods(ctx context.Context) (*v1.PodList, error)
	containerLogs(ctx context.Context, w io.Writer, namespace, pod, container string, q logQuery) error
}

// logFollower prints a container's log across its restarts.
type logFollower struct {
	api      logAPI
	clock    clock.WithTicker
	interval time.Duration
}

// follow prints the container's log and, each time the instance it
// follows ends, waits for the next instance and prints its log from its
// start, until no instance will come or ctx ends. pod is the pod as it was
// before the first stream (nil if unknown): its status names the instance
// that stream shows.
func (f *logFollower) follow(ctx context.Context, w io.Writer, namespace, name, container string, q logQuery, pod *v1.Pod) error {
	lastID := ""
	if pod != nil {
		if cs, _ := containerStatus(pod, container); cs != nil {
			lastID = shownInstance(cs)
		}
	}
	for {
		if err := f.api.containerLogs(ctx, w, namespace, name, container, q); err != nil {
			return err
		}
		// The next instance's log from its start: it began after the
		// first stream, so no line of it is older than since.
		q.tailLines, q.sinceSeconds, q.sinceTime = -1, 0, ""
		id, err := f.waitNext(ctx, namespace, name, container, lastID)
		if err != nil || id == "" {
			return err
		}
		lastID = id
	}
}

// waitNext polls the pod until its container's next instance after lastID
// is there ("" when none will come).
func (f *logFollower) waitNext(ctx context.Context, namespace, name, container, lastID string) (string, error) {
	ticker := f.clock.NewTicker(f.interval)
	defer ticker.Stop()
	for {
		list, err := f.api.pods(ctx)
		if err != nil {
			return "", err
		}
		switch step, id := nextInstance(findPod(list.Items, namespace, name), container, lastID); step {
		case followStream:
			return id, nil
		case followDone:
			return "", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-ticker.C():
		}
	}
}
