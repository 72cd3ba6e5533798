package podworker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/volume"
)

// volumeRefreshPeriod is the least time between two refreshes of a running
// pod's volumes; the worker's resync (a minute) is the most.
const volumeRefreshPeriod = 10 * time.Second

// volumeOptions are what the volume manager needs beyond the pod.
func (w *worker) volumeOptions() volume.SetupOptions {
	d := w.ws.deps
	return volume.SetupOptions{Objects: d.Objects, NodeAllocatable: d.NodeAllocatable}
}

// refreshVolumes brings the content of a running pod's configMap, secret,
// downwardAPI and projected volumes up to date, as the kubelet's volume
// manager does at every sync: changed objects, renewed tokens and new labels
// reach the containers that mount them (not through a subPath, as in the
// kubelet). A pod with nothing running has no reader, and one whose sandbox
// is being replaced sets its volumes up with the new one, so both are left
// alone. A sync that also starts a container sets them up again then, which
// costs little (the objects are cached, unchanged files are not rewritten)
// and keeps a crash-looping container, which starts nothing while it backs
// off, from holding the others' refresh back. A failure leaves the previous
// content in place and is reported, as the kubelet's FailedMount.
//
// It runs at most every volumeRefreshPeriod: a pod woken by many events
// would otherwise read the API as often, and with the API server down each
// attempt waits for its timeout, which would hold back the pod's sync.
func (w *worker) refreshVolumes(ctx context.Context, pod *v1.Pod, st *container.PodStatus, plan Plan, log *slog.Logger) {
	if plan.KillPod || plan.CreateSandbox {
		return
	}
	if len(st.ActiveContainers()) == 0 || !volume.NeedsRefresh(pod) {
		return
	}
	now := w.ws.deps.Clock.Now()
	if !w.volumesRefreshed.IsZero() && now.Sub(w.volumesRefreshed) < volumeRefreshPeriod {
		return
	}
	w.volumesRefreshed = now
	if _, err := w.ws.deps.Volumes.Setup(ctx, pod, w.volumeOptions()); err != nil {
		log.Warn("refreshing volumes failed", "err", err)
		w.event(pod, v1.EventTypeWarning, reasonVolumeFailed, "MountVolume.SetUp failed: "+err.Error())
	}
}

// envObjects fetches the configMaps and secrets c's environment refers to.
// One that does not exist is left out, for makeEnvironment to refuse or,
// when the reference is optional, skip; any other failure is an error.
// Without an object source it returns nil: a standalone node refuses such
// references.
func (w *worker) envObjects(ctx context.Context, pod *v1.Pod, c *v1.Container) (*kuberuntime.EnvObjects, error) {
	objs := w.ws.deps.Objects
	if objs == nil {
		return nil, nil
	}
	cmNames, secretNames := kuberuntime.EnvReferences(c)
	out := &kuberuntime.EnvObjects{
		ConfigMaps: make(map[string]*v1.ConfigMap, len(cmNames)),
		Secrets:    make(map[string]*v1.Secret, len(secretNames)),
	}
	for _, name := range cmNames {
		cm, err := objs.GetConfigMap(ctx, pod.Namespace, name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("container %q: %w", c.Name, err)
		default:
			out.ConfigMaps[name] = cm
		}
	}
	for _, name := range secretNames {
		s, err := objs.GetSecret(ctx, pod.Namespace, name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("container %q: %w", c.Name, err)
		default:
			out.Secrets[name] = s
		}
	}
	return out, nil
}
