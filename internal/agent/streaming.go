package agent

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
)

// RunningContainerID finds the running instance of a pod's container for
// exec and attach (server.StreamingPods).
func (a *apiSource) RunningContainerID(namespace, pod, container string) (string, error) {
	return runningContainerID(a.view.pods(), namespace, pod, container)
}

// runningContainerID picks the runtime ID of the container's running
// instance from the pods' API statuses, or says which of pod, container or
// running instance is missing.
func runningContainerID(pods []v1.Pod, namespace, name, container string) (string, error) {
	var pod *v1.Pod
	for i := range pods {
		// A pod being replaced shows twice: the new one is the one to use.
		if pods[i].Namespace == namespace && pods[i].Name == name && (pod == nil || pod.DeletionTimestamp != nil) {
			pod = &pods[i]
		}
	}
	if pod == nil {
		return "", notFound(fmt.Sprintf("pod %q not found in namespace %q", name, namespace))
	}
	var (
		names []string
		cs    *v1.ContainerStatus
	)
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == container {
				cs = &list[i]
			}
		}
	}
	switch {
	case !slices.Contains(names, container):
		return "", notFound(fmt.Sprintf("container %q not found in pod %s/%s; its containers are: %s",
			container, namespace, name, strings.Join(names, ", ")))
	case cs == nil || cs.ContainerID == "":
		return "", notFound(fmt.Sprintf("container %q in pod %s/%s is not created yet", container, namespace, name))
	case cs.State.Running == nil:
		return "", notFound(fmt.Sprintf("container %q in pod %s/%s is not running (%s)",
			container, namespace, name, stateText(cs.State)))
	}
	// "containerd://<id>" in the API, "<id>" in the runtime.
	_, id, ok := strings.Cut(cs.ContainerID, "://")
	if !ok {
		id = cs.ContainerID
	}
	return id, nil
}

func stateText(s v1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: %s, exit code %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "no state yet"
}

// notFoundError is a refusal that is fs.ErrNotExist to the server (a 404)
// without that error's text in its message.
type notFoundError string

func notFound(msg string) error              { return notFoundError(msg) }
func (e notFoundError) Error() string        { return string(e) }
func (e notFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// RunningPodSandboxID finds the pod's ready sandbox for port forwarding
// (server.StreamingPods).
func (a *apiSource) RunningPodSandboxID(namespace, name string) (string, types.UID, error) {
	var uid types.UID
	for _, p := range a.view.pods() {
		if p.Namespace == namespace && p.Name == name && p.DeletionTimestamp == nil {
			uid = p.UID
		}
	}
	if uid == "" {
		return "", "", notFound(fmt.Sprintf("pod %q not found in namespace %q", name, namespace))
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	sandboxes, err := a.cri.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{container.LabelPodUID: string(uid)},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return "", "", fmt.Errorf("list the sandboxes of pod %s/%s: %w", namespace, name, err)
	}
	if len(sandboxes) == 0 {
		return "", "", notFound(fmt.Sprintf("pod %s/%s has no running sandbox", namespace, name))
	}
	newest := slices.MaxFunc(sandboxes, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return newest.Id, uid, nil
}
