package agent

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/stats"
)

const apiCallTimeout = 10 * time.Second

// apiSource answers the local API from the sync loop and the runtime.
type apiSource struct {
	loop    *syncLoop
	cri     *runtime.Service
	events  *events.Recorder
	devices *devicemanager.Manager
	images  *images.Manager

	capacity, allocatable v1.ResourceList
	evictions             *eviction.Manager
	stats                 *stats.Provider
}

// Images answers /images: every image with why the GC would or would not
// remove it now.
func (a *apiSource) Images() ([]images.ImageStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	return a.images.Images(ctx)
}

func (a *apiSource) Events(namespace, pod string) []v1.Event { return a.events.Events(namespace, pod) }

func (a *apiSource) Pods() []v1.Pod { return a.loop.pods() }

func (a *apiSource) Healthy() error { return a.loop.pleg.Healthy() }

// ContainerLog finds the log file of a pod's container: the current
// instance, or with previous the one before it.
func (a *apiSource) ContainerLog(namespace, pod, name string, previous bool) (string, string, error) {
	var uid string
	for _, p := range a.loop.statuses.Pods() {
		if p.Namespace == namespace && p.Name == pod {
			uid = string(p.UID)
		}
	}
	if uid == "" {
		return "", "", fmt.Errorf("pod %s/%s: %w", namespace, pod, fs.ErrNotExist)
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	st, err := a.cri.PodStatus(ctx, types.UID(uid))
	if err != nil {
		return "", "", err
	}
	instances := st.FindContainers(name)
	idx := 0
	if previous {
		idx = 1
	}
	if len(instances) <= idx {
		if previous {
			return "", "", fmt.Errorf("previous terminated container %q in pod %q: %w", name, pod, fs.ErrNotExist)
		}
		return "", "", fmt.Errorf("container %q in pod %q is not created yet: %w", name, pod, fs.ErrNotExist)
	}
	return instances[idx].LogPath, instances[idx].ID, nil
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
