package podworker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/status"
)

// execution carries out the steps of one plan. Failures are recorded on
// the worker (they become the pod's status) rather than returned: one
// failing container must not stop the others.
type execution struct {
	w    *worker
	pod  *v1.Pod
	plan Plan
	log  *slog.Logger
	// st is the sync's runtime snapshot, with what the steps changed
	// folded in (snapshot.go).
	st        *container.PodStatus
	sandboxID string
	sb        *container.SandboxStatus
	sbCfg     *runtimeapi.PodSandboxConfig
	// next is how soon to retry the first container that could not start.
	next time.Duration
	// touched is set once a step did I/O (anything but building the
	// sandbox's config and waiting out back-offs).
	touched bool
	// What the steps changed, for observe: the containers made or stopped
	// (with their sandboxes' IDs, which the CRI's container status lacks)
	// and those removed; and what only a read of the whole pod shows: the
	// pod stopped, or a sandbox made but not read.
	changed       []pleg.ContainerRef
	removed       []string
	podStopped    bool
	sandboxUnread bool
	// imagePulls are the image volumes pulled in this sync, by name.
	imagePulls map[string]imageVolumePull
}

// apply carries out plan's steps in order. It returns how soon to sync
// again, 0 for "no hurry", and the execution, which says whether a step
// did any I/O and what the steps changed.
func (w *worker) apply(ctx context.Context, pod *v1.Pod, st *container.PodStatus, plan Plan, log *slog.Logger) (time.Duration, *execution) {
	defer w.releaseStartSlot()
	ex := &execution{w: w, pod: pod, plan: plan, log: log, st: st, sandboxID: plan.SandboxID}
	for _, s := range plan.Steps(pod) {
		if s.Kind != StepPrepareSandbox && s.Kind != StepStartContainer {
			ex.touched = true
		}
		if after, stop := ex.run(ctx, s); stop {
			return after, ex
		}
	}
	return ex.next, ex
}

// observe is the pod's runtime status after the steps: the sync's
// snapshot with the containers they made or stopped read back one by one
// (the sandbox a step made is in it already), or the whole pod read again
// when a step stopped it. One read of the whole pod per sync, not two:
// starting 50 pods at once read each pod's sandboxes and containers about
// four times, listing them each time.
func (ex *execution) observe(ctx context.Context) (*container.PodStatus, error) {
	rt := ex.w.ws.deps.Runtime
	if ex.podStopped || ex.sandboxUnread {
		return rt.PodStatus(ctx, ex.pod.UID)
	}
	read, gone, err := readContainers(ctx, rt, ex.changed)
	if err != nil {
		return nil, err
	}
	return withContainers(ex.st, read, append(slices.Clone(ex.removed), gone...)), nil
}

// run carries out one step. stop ends the sync's steps, with after as when
// to sync again.
func (ex *execution) run(ctx context.Context, s Step) (after time.Duration, stop bool) {
	w := ex.w
	switch s.Kind {
	case StepKillPod:
		// The plan kills the pod before every new sandbox, the first
		// too: only a pod with something to stop changes.
		ex.podStopped = hasActive(ex.st)
		if err := w.stopPod(ctx, ex.pod, ex.st, nil, ex.log); err != nil {
			ex.log.Warn("stopping pod failed", "err", err)
			return retryAfterError, true
		}
		ex.st = stoppedSnapshot(ex.st)
	case StepPrepareSandbox:
		cfg, warnings, err := w.sandboxConfig(ex.pod, ex.plan.SandboxAttempt)
		if err != nil {
			w.syncError = &status.Waiting{Reason: reasonSandboxFailed, Message: err.Error()}
			return retryAfterError, true
		}
		// The config is built on every sync; its warnings are recorded
		// when a sandbox is made of it, not once a minute for every pod.
		if ex.plan.CreateSandbox {
			w.dnsWarnings(ex.pod, warnings)
		}
		ex.sbCfg = cfg
		if !ex.plan.CreateSandbox {
			w.syncError = nil
		}
	case StepCreateSandbox:
		if after, ok := ex.createSandbox(ctx); !ok {
			return after, true
		}
		w.syncError = nil
	case StepKillContainer:
		ex.killContainer(ctx, s.Kill)
	case StepStartContainer:
		ex.startStep(ctx, s)
		if _, failed := w.waiting[s.Container.Name]; failed && s.blocks() {
			// A regular init container that did not start holds back
			// everything after it.
			return ex.next, true
		}
	}
	return 0, false
}

func (ex *execution) killContainer(ctx context.Context, k Kill) {
	ex.log.Info("stopping container", "container", k.Name, "reason", k.Reason)
	ex.w.event(ex.pod, v1.EventTypeNormal, "Killing", k.Reason)
	grace := gracePeriod(ex.pod)
	if k.GracePeriod != nil {
		grace = *k.GracePeriod
	}
	ex.changed = append(ex.changed, pleg.ContainerRef{ID: k.ID, SandboxID: sandboxOf(ex.st, k.ID)})
	if err := ex.w.stopContainer(ctx, ex.pod, k.ID, k.Name, grace, ex.log); err != nil {
		ex.log.Warn("stopping container failed", "container", k.Name, "err", err)
	}
}

// sandboxOf is the sandbox of the container with id in st, "" if st lacks it.
func sandboxOf(st *container.PodStatus, id string) string {
	for _, c := range st.Containers {
		if c.ID == id {
			return c.SandboxID
		}
	}
	return ""
}

// startStep starts one container unless the pod is being killed, and
// keeps the soonest retry.
func (ex *execution) startStep(ctx context.Context, s Step) {
	if ctx.Err() != nil {
		// The pod is being killed: start nothing more.
		return
	}
	if ex.sb == nil {
		ex.sb = sandboxByID(ex.st, ex.sandboxID)
	}
	after := ex.startContainer(ctx, s.Container, s.Init)
	// startContainer leaves a waiting reason on every failure, none on success.
	ex.w.ws.deps.Metrics.containerStarted(s.Init, ex.w.waiting[s.Container.Name].Reason)
	if after > 0 && (ex.next == 0 || after < ex.next) {
		ex.next = after
	}
}

// volumeBackOffKey is the key of a pod's volume set-up in the back-off it
// shares with the preparation of its ResourceClaims.
func volumeBackOffKey(uid types.UID) string { return "volumes/" + string(uid) }

// networkNotReadyMsg is the kubelet's NetworkNotReadyErrorMsg.
const networkNotReadyMsg = "network is not ready"

// createSandbox prepares the host for the pod and creates its sandbox,
// holding a pod-start slot. ok is false when the sync must stop.
func (ex *execution) createSandbox(ctx context.Context) (after time.Duration, ok bool) {
	w, pod, log := ex.w, ex.pod, ex.log
	d := w.ws.deps
	if d.NetworkNotReady != nil && !pod.Spec.HostNetwork {
		// The kubelet's syncPod: a pod waits for the network with an
		// event, rather than fail in the runtime's CNI ADD.
		if err := d.NetworkNotReady(ctx); err != nil {
			w.syncError = &status.Waiting{Reason: events.NetworkNotReady, Message: networkNotReadyMsg + ": " + err.Error()}
			w.event(pod, v1.EventTypeWarning, events.NetworkNotReady, networkNotReadyMsg+": "+err.Error())
			log.Warn("the pod network is not ready; the pod waits", "err", err)
			return retryAfterError, false
		}
	}
	if _, err := d.Volumes.Setup(ctx, pod, w.volumeOptions()); err != nil {
		w.syncError = &status.Waiting{Reason: reasonVolumeFailed, Message: err.Error()}
		w.event(pod, v1.EventTypeWarning, reasonVolumeFailed, "MountVolume.SetUp failed: "+err.Error())
		log.Warn("setting up volumes failed", "err", err)
		// A volume that waits (a claim not bound, an attach, a driver that
		// fails) is retried with a growing back-off, as the kubelet's
		// operation executor backs off each failed mount.
		key := volumeBackOffKey(pod.UID)
		w.ws.prepareBackOff.Next(key, d.Clock.Now())
		return w.ws.prepareBackOff.Get(key), false
	}
	w.ws.prepareBackOff.Reset(volumeBackOffKey(pod.UID))
	if d.Cgroups != nil {
		if _, err := d.Cgroups.EnsurePod(pod); err != nil {
			w.syncError = &status.Waiting{Reason: reasonPodCgroupFailed, Message: err.Error()}
			log.Warn("creating the pod cgroup failed", "err", err)
			return retryAfterError, false
		}
	}
	if after, ok := ex.prepareResources(ctx); !ok {
		return after, false
	}
	if err := os.MkdirAll(ex.sbCfg.LogDirectory, 0o755); err != nil {
		w.syncError = &status.Waiting{Reason: reasonSandboxFailed, Message: err.Error()}
		return retryAfterError, false
	}
	if err := w.ws.startSlots.acquire(ctx); err != nil {
		return retryAfterError, false
	}
	w.holdsStartSlot = true
	log.Info("creating sandbox", "attempt", ex.plan.SandboxAttempt)
	began := d.Clock.Now()
	id, err := d.Runtime.RunPodSandbox(ctx, ex.sbCfg)
	// Folded in below once read; until then only a read of the whole pod
	// shows it.
	ex.sandboxUnread = err == nil
	if err != nil {
		w.syncError = &status.Waiting{Reason: reasonSandboxFailed, Message: fmt.Sprintf("create pod sandbox: %v", err)}
		w.event(pod, v1.EventTypeWarning, reasonSandboxFailed, "Failed to create pod sandbox: "+err.Error())
		log.Warn("creating sandbox failed", "err", err)
		return retryAfterError, false
	}
	// The new sandbox's IP is needed by the downward API and hooks: read
	// that sandbox alone, not the whole pod again.
	sb, err := d.Runtime.SandboxStatus(ctx, id)
	if err != nil {
		log.Warn("reading the new sandbox's status from the runtime failed", "err", err)
		return retryAfterError, false
	}
	ex.sandboxID, ex.st, ex.sandboxUnread = id, withSandbox(ex.st, sb), false
	w.startup.add(phaseSandbox, d.Clock.Since(began))
	return 0, true
}

// prepareResources prepares the pod's ResourceClaims before its sandbox,
// as the kubelet's SyncPod does: a failure is the kubelet's
// FailedPrepareDynamicResources event, and the sync is tried again after a
// back-off that grows with each failure (a driver that hangs or crashes is
// not called in a tight loop); the claims prepared so far stay prepared.
func (ex *execution) prepareResources(ctx context.Context) (after time.Duration, ok bool) {
	w, pod, log := ex.w, ex.pod, ex.log
	d := w.ws.deps
	if d.DynamicResources == nil || !usesClaims(pod) {
		return 0, true
	}
	err := d.DynamicResources.PrepareResources(ctx, pod)
	key := string(pod.UID)
	if err == nil {
		w.ws.prepareBackOff.Reset(key)
		return 0, true
	}
	w.event(pod, v1.EventTypeWarning, events.FailedPrepareDynamicResources, "Failed to prepare dynamic resources: "+err.Error())
	log.Warn("preparing the pod's dynamic resources failed", "err", err)
	w.ws.prepareBackOff.Next(key, d.Clock.Now())
	return w.ws.prepareBackOff.Get(key), false
}

// usesClaims tells whether the pod has ResourceClaims to prepare: its own,
// or the one the scheduler made for extended resources a DRA driver serves.
func usesClaims(pod *v1.Pod) bool {
	return len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil
}

// startContainer pulls, creates and starts one container, honouring the
// crash-loop and image-pull back-offs (gateStart decides those). It returns
// when to retry if it could not start the container now.
func (ex *execution) startContainer(ctx context.Context, c *v1.Container, init bool) time.Duration {
	w, pod := ex.w, ex.pod
	d := w.ws.deps
	now := d.Clock.Now()
	if g := gateStart(w.ws.backOff, w.ws.pullBackOff, now, pod, c, ex.st); g != nil {
		w.waiting[c.Name] = g.waiting
		w.event(pod, g.eventType, g.eventReason, g.eventMessage)
		return g.wait
	}
	ex.touched = true
	key := pullKey(pod, c)
	pulling := d.Clock.Now()
	imageVolumes, waiting, retry := ex.imageVolumes(ctx, c)
	if waiting != nil {
		w.waiting[c.Name] = *waiting
		return retry
	}
	image, waiting := w.ensureImage(ctx, pod, c, ex.sbCfg, ex.log)
	if waiting != nil {
		w.waiting[c.Name] = *waiting
		if waiting.Reason != reasonErrImagePull {
			// Not a failed pull: nothing to back off from, as in the
			// kubelet (an image imported later is used at the next try).
			return retryAfterError
		}
		w.ws.pullBackOff.Next(key, now)
		return w.ws.pullBackOff.Get(key)
	}
	w.ws.pullBackOff.Reset(key)
	creating := d.Clock.Now()
	w.startup.add(phaseImagePull, creating.Sub(pulling))
	return ex.createAndStart(ctx, c, init, image, imageVolumes, creating)
}

// createAndStart creates and starts container c from image, then runs its
// postStart hook.
func (ex *execution) createAndStart(ctx context.Context, c *v1.Container, init bool, image presentImage,
	imageVolumes map[string]*runtimeapi.ImageSpec, creating time.Time) time.Duration {
	w, pod, log := ex.w, ex.pod, ex.log
	d := w.ws.deps
	restartCount := 0
	if prev := ex.st.LatestContainer(c.Name); prev != nil {
		restartCount = prev.RestartCount + 1
	}
	targetID, err := ephemeralTarget(pod, c, ex.st)
	if err != nil {
		return w.configError(pod, c, err, log)
	}
	cfg, opts, err := w.containerConfig(ctx, pod, c, init, restartCount, image, imageVolumes, ex.sb, targetID)
	if err != nil {
		return w.configError(pod, c, err, log)
	}
	id, err := d.Runtime.CreateContainer(ctx, ex.sandboxID, cfg, ex.sbCfg)
	if err != nil && ctx.Err() != nil {
		return 0 // the pod is being killed; its termination says what happened
	}
	if err != nil {
		w.waiting[c.Name] = status.Waiting{Reason: reasonCreateContainerError, Message: err.Error()}
		w.event(pod, v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		log.Warn("creating container failed", "container", c.Name, "err", err)
		return retryAfterError
	}
	ex.changed = append(ex.changed, pleg.ContainerRef{ID: id, SandboxID: ex.sandboxID})
	w.event(pod, v1.EventTypeNormal, "Created", "Created container "+c.Name)
	starting := d.Clock.Now()
	w.startup.add(phaseContainerCreate, starting.Sub(creating))
	if err := d.Runtime.StartContainer(ctx, id); err != nil {
		w.event(pod, v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		w.waiting[c.Name] = status.Waiting{Reason: reasonRunContainerError, Message: err.Error()}
		log.Warn("starting container failed", "container", c.Name, "err", err)
		return retryAfterError
	}
	if d.Resize != nil && specContainer(pod, c.Name) != nil { // not an ephemeral one
		// The container runs with what is allocated now, as the kubelet's
		// setActuatedContainerResources records at its creation. Left to
		// the next sync that saw it running, a resize admitted before that
		// sync was taken as done. After the start: the checkpoint's write
		// is not on the way from the container's creation to its start.
		_ = d.Resize.SetActuated(pod.UID, c.Name, id, c.Resources)
	}
	delete(w.waiting, c.Name)
	w.event(pod, v1.EventTypeNormal, "Started", "Started container "+c.Name)
	log.Info("started container", "container", c.Name, "id", id, "restartCount", restartCount)
	ex.removed = append(ex.removed, w.removeOldInstances(ctx, ex.st, c.Name, log)...)
	if !ex.postStart(ctx, c, id, opts) {
		return 0
	}
	w.startup.add(phaseContainerStart, d.Clock.Since(starting))
	return 0
}

// postStart runs c's postStart hook, if it has one. A hook that fails
// kills the container; ok is false then, or when the pod is being killed.
func (ex *execution) postStart(ctx context.Context, c *v1.Container, id string, opts kuberuntime.ContainerOptions) (ok bool) {
	w, pod, log := ex.w, ex.pod, ex.log
	h := c.Lifecycle
	if h == nil || h.PostStart == nil {
		return true
	}
	err := runHandler(ctx, w.ws.deps.Runtime, w.ws.httpHooks, h.PostStart, pod, c, id, opts.PodIP, postStartTimeout)
	if err == nil {
		return true
	}
	if ctx.Err() != nil {
		return false // the pod is being killed, its hook with it
	}
	msg := fmt.Sprintf("PostStartHook failed: %v", err)
	w.event(pod, v1.EventTypeWarning, "FailedPostStartHook", msg)
	log.Warn("postStart hook failed; killing container", "container", c.Name, "err", err)
	w.waiting[c.Name] = status.Waiting{Reason: reasonPostStartHookError, Message: msg}
	if err := w.stopContainer(ctx, pod, id, c.Name, 0, log); err != nil {
		log.Warn("stopping container failed", "container", c.Name, "err", err)
	}
	return false
}
