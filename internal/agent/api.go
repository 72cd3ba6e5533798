package agent

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/server"
	"github.com/berth-dev/berth/internal/stats"
	"github.com/berth-dev/berth/internal/status"
)

const apiCallTimeout = 10 * time.Second

// apiSource answers the local API (and the admin socket's streams and
// logs) from the sync loop's view, the status manager and the runtime.
type apiSource struct {
	view     *podView
	statuses *status.Manager
	// pleg is the relist's health.
	pleg     interface{ Healthy() error }
	nodeName string
	clk      clock.PassiveClock
	cri      *runtime.Service
	events   *events.Recorder
	devices  *devicemanager.Manager
	images   *images.Manager

	// capacity and allocatable are the machine's, without the devices.
	capacity, allocatable v1.ResourceList
	evictions             *eviction.Manager
	stats                 *stats.Provider
	// statsMaxAge is how old a reading /metrics/cadvisor may serve: the
	// eviction manager's period, whose readings it shares.
	statsMaxAge  time.Duration
	probeMetrics prometheus.Gatherer
	// ready keeps /node's Ready condition between requests.
	ready readyTracker
	// network is berth's view of the pod network (noderuntime).
	network func() string
}

// Admission answers /pods/{namespace}/{name}/admission: how the pod was
// admitted, or why not.
func (a *apiSource) Admission(namespace, name string) (admission.Result, bool) {
	return a.view.admission(namespace, name)
}

// Images answers /images: every image with why the GC would or would not
// remove it now.
func (a *apiSource) Images() ([]images.ImageStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	return a.images.Images(ctx)
}

func (a *apiSource) Events(namespace, pod string) []v1.Event { return a.events.Events(namespace, pod) }

func (a *apiSource) Pods() []v1.Pod { return a.view.pods() }

// HealthChecks are /healthz's checks: the runtime says it is ready, the
// PLEG relists, the sync loop turns.
func (a *apiSource) HealthChecks() []server.HealthCheck {
	return []server.HealthCheck{
		{Name: "runtime", Check: a.cri.RuntimeReady},
		{Name: "pleg", Check: func(context.Context) error { return a.pleg.Healthy() }},
		{Name: "syncloop", Check: a.view.healthy},
	}
}

// AllEvents answers /events: every event kept, about pods and the node.
func (a *apiSource) AllEvents() []v1.Event { return a.events.All() }

// ContainerLog finds the log file of a pod's container: the instance the
// kubelet would show (the running or last one), or with previous the one
// that terminated before it.
func (a *apiSource) ContainerLog(namespace, pod, name string, previous bool) (string, string, error) {
	var found *v1.Pod
	for _, p := range a.statuses.Pods() {
		if p.Namespace == namespace && p.Name == pod {
			found = &p
		}
	}
	if found == nil {
		return "", "", fmt.Errorf("pod %s/%s: %w", namespace, pod, fs.ErrNotExist)
	}
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{found.Status.ContainerStatuses, found.Status.InitContainerStatuses, found.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		return "", "", fmt.Errorf("container %q in pod %q is not created yet: %w", name, pod, fs.ErrNotExist)
	}
	id, err := containerToLog(cs, pod, previous)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	st, err := a.cri.PodStatus(ctx, found.UID)
	if err != nil {
		return "", "", err
	}
	for _, c := range st.FindContainers(name) {
		if c.ID == id {
			return c.LogPath, c.ID, nil
		}
	}
	return "", "", fmt.Errorf("container %q in pod %q: instance %s is gone: %w", name, pod, id, fs.ErrNotExist)
}

// containerToLog picks, from a container's API status, the runtime ID of
// the instance whose log is asked for, as the kubelet's
// validateContainerLogStatus does: with previous, the last terminated one;
// else the running or terminated one, or, while it waits to restart, the
// last terminated one.
func containerToLog(cs *v1.ContainerStatus, pod string, previous bool) (string, error) {
	last := cs.LastTerminationState.Terminated
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q: %w", cs.Name, pod, fs.ErrNotExist)
		}
		id = last.ContainerID
	case cs.State.Running != nil:
		id = cs.ContainerID
	case cs.State.Terminated != nil:
		id = cmp.Or(cs.State.Terminated.ContainerID, cs.ContainerID)
	case last != nil && last.ContainerID != "":
		id = last.ContainerID
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start: %w", cs.Name, pod, fs.ErrNotExist)
	}
	if id == "" {
		return "", fmt.Errorf("container %q in pod %q is not created yet: %w", cs.Name, pod, fs.ErrNotExist)
	}
	// "containerd://<id>" in the API, "<id>" in the runtime.
	if _, rest, ok := strings.Cut(id, "://"); ok {
		id = rest
	}
	return id, nil
}

func (a *apiSource) ContainerRunning(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	st, err := a.cri.ContainerStatus(ctx, id)
	if err != nil {
		return false
	}
	return st.State == runtimeapi.ContainerState_CONTAINER_RUNNING
}
