package podworker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/status"
)

// Waiting reasons, as the kubelet reports them.
const (
	reasonCrashLoopBackOff     = "CrashLoopBackOff"
	reasonErrImagePull         = "ErrImagePull"
	reasonImagePullBackOff     = "ImagePullBackOff"
	reasonCreateConfigError    = "CreateContainerConfigError"
	reasonCreateContainerError = "CreateContainerError"
	reasonRunContainerError    = "RunContainerError"
	reasonPostStartHookError   = "PostStartHookError"
	reasonSandboxFailed        = "FailedCreatePodSandBox"
	reasonVolumeFailed         = "FailedMount"
	reasonPodCgroupFailed      = "FailedCreatePodContainer"
)

// apply carries out plan. Failures are recorded on the worker (they become
// the pod's status) rather than returned: one failing container must not
// stop the others. It returns how soon to sync again, 0 for "no hurry".
// releaseStartSlot gives back the pod-start slot this sync holds, if any.
func (w *worker) releaseStartSlot() {
	if w.holdsStartSlot {
		w.holdsStartSlot = false
		w.ws.startSlots.release()
	}
}

func (w *worker) apply(ctx context.Context, pod *v1.Pod, st *container.PodStatus, plan Plan, log *slog.Logger) time.Duration {
	d := w.ws.deps
	if plan.KillPod {
		if err := w.stopPod(ctx, pod, st, nil, log); err != nil {
			log.Warn("stopping pod failed", "err", err)
			return retryAfterError
		}
		st = stoppedSnapshot(st)
		if !plan.CreateSandbox {
			return 0
		}
	}

	sandboxID := plan.SandboxID
	sbCfg, err := w.sandboxConfig(pod, plan.SandboxAttempt)
	if err != nil {
		w.syncError = &status.Waiting{Reason: reasonSandboxFailed, Message: err.Error()}
		return retryAfterError
	}
	if plan.CreateSandbox {
		if _, err := d.Volumes.Setup(ctx, pod, w.volumeOptions()); err != nil {
			w.syncError = &status.Waiting{Reason: reasonVolumeFailed, Message: err.Error()}
			w.event(pod, v1.EventTypeWarning, reasonVolumeFailed, "MountVolume.SetUp failed: "+err.Error())
			log.Warn("setting up volumes failed", "err", err)
			return retryAfterError
		}
		if d.Cgroups != nil {
			if _, err := d.Cgroups.EnsurePod(pod); err != nil {
				w.syncError = &status.Waiting{Reason: reasonPodCgroupFailed, Message: err.Error()}
				log.Warn("creating the pod cgroup failed", "err", err)
				return retryAfterError
			}
		}
		if err := os.MkdirAll(sbCfg.LogDirectory, 0o755); err != nil {
			w.syncError = &status.Waiting{Reason: reasonSandboxFailed, Message: err.Error()}
			return retryAfterError
		}
		if err := w.ws.startSlots.acquire(ctx); err != nil {
			return retryAfterError
		}
		w.holdsStartSlot = true
		defer w.releaseStartSlot()
		log.Info("creating sandbox", "attempt", plan.SandboxAttempt)
		began := d.Clock.Now()
		sandboxID, err = d.Runtime.RunPodSandbox(ctx, sbCfg)
		if err != nil {
			w.syncError = &status.Waiting{Reason: reasonSandboxFailed, Message: fmt.Sprintf("create pod sandbox: %v", err)}
			w.event(pod, v1.EventTypeWarning, reasonSandboxFailed, "Failed to create pod sandbox: "+err.Error())
			log.Warn("creating sandbox failed", "err", err)
			return retryAfterError
		}
		// The new sandbox's IP is needed by the downward API and hooks:
		// read that sandbox alone, not the whole pod again.
		sb, err := d.Runtime.SandboxStatus(ctx, sandboxID)
		if err != nil {
			log.Warn("reading the new sandbox's status from the runtime failed", "err", err)
			return retryAfterError
		}
		st = withSandbox(st, sb)
		w.startup.add(phaseSandbox, d.Clock.Since(began))
	}
	w.syncError = nil

	for _, k := range plan.Kill {
		log.Info("stopping container", "container", k.Name, "reason", k.Reason)
		w.event(pod, v1.EventTypeNormal, "Killing", k.Reason)
		grace := gracePeriod(pod)
		if k.GracePeriod != nil {
			grace = *k.GracePeriod
		}
		if err := w.stopContainer(ctx, pod, k.ID, k.Name, grace, log); err != nil {
			log.Warn("stopping container failed", "container", k.Name, "err", err)
		}
	}

	return w.startContainers(ctx, pod, st, plan, sandboxID, sbCfg, log)
}

// startContainers starts what plan asks for, in the kubelet's SyncPod
// order: ephemeral, init, then app containers. It returns how soon to retry
// the first that could not start, 0 for "no hurry".
func (w *worker) startContainers(ctx context.Context, pod *v1.Pod, st *container.PodStatus, plan Plan,
	sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, log *slog.Logger) time.Duration {
	d := w.ws.deps
	sb := sandboxByID(st, sandboxID)
	var next time.Duration
	start := func(c *v1.Container, init bool) {
		if ctx.Err() != nil {
			// The pod is being killed: start nothing more.
			return
		}
		after := w.startContainer(ctx, pod, c, init, st, sandboxID, sb, sbCfg, log)
		// startContainer leaves a waiting reason on every failure, none on success.
		d.Metrics.containerStarted(init, w.waiting[c.Name].Reason)
		if after > 0 && (next == 0 || after < next) {
			next = after
		}
	}
	// Ephemeral containers first: they may debug a pod whose
	// initialization is stuck (the kubelet's SyncPod order).
	for _, i := range plan.StartEphemeral {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		start(&c, false)
	}
	for _, i := range plan.StartInit {
		c := &pod.Spec.InitContainers[i]
		start(c, true)
		if _, failed := w.waiting[c.Name]; failed && !isSidecar(c) {
			// A regular init container that did not start holds back
			// everything after it; a sidecar's failure does not.
			return next
		}
	}
	for _, i := range plan.Start {
		start(&pod.Spec.Containers[i], false)
	}
	return next
}

func (w *worker) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	d := w.ws.deps
	opts := kuberuntime.SandboxOptions{PodLogsDir: d.PodLogsDir, Attempt: attempt}
	if d.Cgroups != nil {
		opts.CgroupParent = d.Cgroups.CgroupParent(pod)
	}
	return kuberuntime.SandboxConfig(pod, opts, d.DNS)
}

// startContainer pulls, creates and starts one container, honouring the
// crash-loop and image-pull back-offs. It returns when to retry if it could
// not start the container now.
func (w *worker) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, init bool,
	st *container.PodStatus, sandboxID string, sb *container.SandboxStatus, sbCfg *runtimeapi.PodSandboxConfig, log *slog.Logger) time.Duration {
	d := w.ws.deps
	now := d.Clock.Now()
	if left, msg := checkBackOff(w.ws.backOff, now, pod, c, st); left > 0 {
		w.waiting[c.Name] = status.Waiting{Reason: reasonCrashLoopBackOff, Message: msg}
		w.event(pod, v1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID))
		return left
	}

	pullKey := string(pod.UID) + "/" + c.Image
	if w.ws.pullBackOff.IsInBackOffSinceUpdate(pullKey, now) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		w.waiting[c.Name] = status.Waiting{Reason: reasonImagePullBackOff, Message: msg}
		w.event(pod, v1.EventTypeNormal, "BackOff", msg)
		return w.ws.pullBackOff.Get(pullKey)
	}
	pulling := d.Clock.Now()
	imageRef, waiting := w.ensureImage(ctx, pod, c, sbCfg, log)
	if waiting != nil {
		w.waiting[c.Name] = *waiting
		if waiting.Reason != reasonErrImagePull {
			// Not a failed pull: nothing to back off from, as in the
			// kubelet (an image imported later is used at the next try).
			return retryAfterError
		}
		w.ws.pullBackOff.Next(pullKey, now)
		return w.ws.pullBackOff.Get(pullKey)
	}
	w.ws.pullBackOff.Reset(pullKey)
	creating := d.Clock.Now()
	w.startup.add(phaseImagePull, creating.Sub(pulling))

	restartCount := 0
	if prev := st.LatestContainer(c.Name); prev != nil {
		restartCount = prev.RestartCount + 1
	}
	targetID, err := ephemeralTarget(pod, c, st)
	if err != nil {
		return w.configError(pod, c, err, log)
	}
	cfg, opts, err := w.containerConfig(ctx, pod, c, init, restartCount, imageRef, sb, targetID)
	if err != nil {
		return w.configError(pod, c, err, log)
	}
	id, err := d.Runtime.CreateContainer(ctx, sandboxID, cfg, sbCfg)
	if err != nil && ctx.Err() != nil {
		return 0 // the pod is being killed; its termination says what happened
	}
	if err != nil {
		w.waiting[c.Name] = status.Waiting{Reason: reasonCreateContainerError, Message: err.Error()}
		w.event(pod, v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		log.Warn("creating container failed", "container", c.Name, "err", err)
		return retryAfterError
	}
	w.event(pod, v1.EventTypeNormal, "Created", "Created container "+c.Name)
	starting := d.Clock.Now()
	w.startup.add(phaseContainerCreate, starting.Sub(creating))
	if err := d.Runtime.StartContainer(ctx, id); err != nil {
		w.event(pod, v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		w.waiting[c.Name] = status.Waiting{Reason: reasonRunContainerError, Message: err.Error()}
		log.Warn("starting container failed", "container", c.Name, "err", err)
		return retryAfterError
	}
	delete(w.waiting, c.Name)
	w.event(pod, v1.EventTypeNormal, "Started", "Started container "+c.Name)
	log.Info("started container", "container", c.Name, "id", id, "restartCount", restartCount)
	w.removeOldInstances(ctx, st, c.Name, log)

	if h := c.Lifecycle; h != nil && h.PostStart != nil {
		podIP := opts.PodIP
		if err := runHandler(ctx, d.Runtime, w.ws.httpHooks, h.PostStart, pod, c, id, podIP, postStartTimeout); err != nil {
			if ctx.Err() != nil {
				return 0 // the pod is being killed, its hook with it
			}
			msg := fmt.Sprintf("PostStartHook failed: %v", err)
			w.event(pod, v1.EventTypeWarning, "FailedPostStartHook", msg)
			log.Warn("postStart hook failed; killing container", "container", c.Name, "err", err)
			w.waiting[c.Name] = status.Waiting{Reason: reasonPostStartHookError, Message: msg}
			if err := w.stopContainer(ctx, pod, id, c.Name, 0, log); err != nil {
				log.Warn("stopping container failed", "container", c.Name, "err", err)
			}
			return 0
		}
	}
	w.startup.add(phaseContainerStart, d.Clock.Since(starting))
	return 0
}

// containerConfig prepares what container c needs on the host and builds
// its CRI config: the steps of the kubelet's generateContainerConfig. Any
// error is a CreateContainerConfigError.
func (w *worker) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, init bool, restartCount int,
	imageRef string, sb *container.SandboxStatus, targetID string) (*runtimeapi.ContainerConfig, kuberuntime.ContainerOptions, error) {
	d := w.ws.deps
	opts := kuberuntime.ContainerOptions{
		RestartCount:       restartCount,
		Init:               init,
		HostIP:             d.HostIP,
		NodeName:           d.NodeName,
		ImageRef:           imageRef,
		NodeAllocatable:    d.NodeAllocatable,
		NodeMemoryCapacity: d.NodeAllocatable.Memory().Value(),
		Memory:             d.Memory,
		SeccompProfileRoot: d.SeccompProfileRoot,
		TargetContainerID:  targetID,
	}
	var err error
	if opts.TerminationMessageHostPath, err = w.terminationMessageFile(pod, c, restartCount); err != nil {
		return nil, opts, err
	}
	if opts.VolumePaths, err = d.Volumes.Setup(ctx, pod, w.volumeOptions()); err != nil {
		return nil, opts, err
	}
	if opts.EnvObjects, err = w.envObjects(ctx, pod, c); err != nil {
		return nil, opts, err
	}
	if opts.ServiceEnv, err = w.serviceEnv(pod); err != nil {
		return nil, opts, err
	}
	if sb != nil {
		opts.PodIP, opts.PodIPs = sb.IP, sb.IPs
	}
	if pod.Spec.HostNetwork {
		opts.PodIP, opts.PodIPs = d.HostIP, []string{d.HostIP}
	}
	if d.Devices != nil {
		if opts.Devices, err = d.Devices.ContainerOptions(ctx, pod, c); err != nil {
			return nil, opts, err
		}
	}
	if err := w.prepareFiles(pod, c, &opts); err != nil {
		return nil, opts, err
	}
	if err := w.imageUser(ctx, pod, c, &opts); err != nil {
		return nil, opts, err
	}
	cfg, err := kuberuntime.ContainerConfig(pod, c, opts)
	return cfg, opts, err
}

// imageUser reads the user c's image runs as from the runtime, as the
// kubelet does once the image is present, and refuses a container whose
// runAsNonRoot that user breaks. The refusal is returned unwrapped: its
// message is the kubelet's, word for word.
func (w *worker) imageUser(ctx context.Context, pod *v1.Pod, c *v1.Container, opts *kuberuntime.ContainerOptions) error {
	ref := opts.ImageRef
	if ref == "" {
		ref = c.Image
	}
	img, err := w.ws.deps.Runtime.ImageStatus(ctx, ref)
	if err != nil {
		return fmt.Errorf("reading the user of image %q: %w", c.Image, err)
	}
	opts.ImageUID, opts.ImageUser = kuberuntime.ImageUser(img)
	return kuberuntime.VerifyRunAsNonRoot(pod, c, opts.ImageUID, opts.ImageUser)
}

// configError records err as c's CreateContainerConfigError and posts the
// kubelet's Warning Failed event ("Error: ..."), for every error of
// building the container's config, and says when to try again. Each retry
// posts the event again: the recorder folds the repeats into one event
// with a count, as the kubelet's does.
func (w *worker) configError(pod *v1.Pod, c *v1.Container, err error, log *slog.Logger) time.Duration {
	w.waiting[c.Name] = status.Waiting{Reason: reasonCreateConfigError, Message: err.Error()}
	w.event(pod, v1.EventTypeWarning, events.FailedToCreateContainer, "Error: "+err.Error())
	log.Warn("the container's config could not be made", "container", c.Name, "err", err)
	return retryAfterError
}

// prepareFiles writes the pod's managed /etc/hosts and creates the subPaths
// the container mounts, as the kubelet does before CreateContainer.
func (w *worker) prepareFiles(pod *v1.Pod, c *v1.Container, opts *kuberuntime.ContainerOptions) error {
	d := w.ws.deps
	hosts, err := kuberuntime.HostsFile(pod, opts.PodIPs, "", d.NodeHosts)
	if err != nil {
		return err
	}
	if opts.HostsFilePath, err = d.Volumes.WriteHostsFile(pod.UID, hosts); err != nil {
		return err
	}
	subPaths, err := kuberuntime.SubPaths(pod, c, *opts)
	if err != nil {
		return err
	}
	for _, sp := range subPaths {
		if err := d.Volumes.PrepareSubPath(sp.VolumePath, sp.Path); err != nil {
			return fmt.Errorf("container %q: volumeMounts[%d].subPath: %w", c.Name, sp.MountIndex, err)
		}
	}
	return nil
}

// terminationMessageFile creates the host file mounted at the container's
// terminationMessagePath, so its message survives the container.
func (w *worker) terminationMessageFile(pod *v1.Pod, c *v1.Container, restartCount int) (string, error) {
	if c.TerminationMessagePath == "" {
		return "", nil
	}
	dir := w.ws.deps.Volumes.ContainerDir(pod.UID, c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("termination message file: %w", err)
	}
	path := filepath.Join(dir, "termination-log-"+strconv.Itoa(restartCount))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if err != nil {
		return "", fmt.Errorf("termination message file: %w", err)
	}
	// The container may run as any user; the file must be writable by it.
	if err := f.Chmod(0o666); err != nil {
		f.Close()
		return "", fmt.Errorf("termination message file: %w", err)
	}
	return path, f.Close()
}

// removeOldInstances removes exited instances of a container beyond the
// newest one, which stays for `logs --previous` and lastState (the
// kubelet's container GC keeps the same one per container).
func (w *worker) removeOldInstances(ctx context.Context, st *container.PodStatus, name string, log *slog.Logger) {
	kept := false
	for _, cs := range st.FindContainers(name) {
		if cs.State != container.StateExited {
			continue
		}
		if !kept {
			kept = true
			continue
		}
		if err := w.ws.deps.Runtime.RemoveContainer(ctx, cs.ID); err != nil {
			log.Warn("removing old container failed", "container", name, "id", cs.ID, "err", err)
		}
	}
}

// ephemeralTarget is the ID of the running container whose process
// namespace c joins: an ephemeral container's targetContainerName, as the
// kubelet's getTargetID finds it. It is "" for every other container.
func ephemeralTarget(pod *v1.Pod, c *v1.Container, st *container.PodStatus) (string, error) {
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if ec.Name != c.Name || ec.TargetContainerName == "" {
			continue
		}
		if cs := st.LatestContainer(ec.TargetContainerName); cs != nil && cs.State == container.StateRunning {
			return cs.ID, nil
		}
		return "", fmt.Errorf("unable to find target container %s", ec.TargetContainerName)
	}
	return "", nil
}

func sandboxByID(st *container.PodStatus, id string) *container.SandboxStatus {
	for i := range st.Sandboxes {
		if st.Sandboxes[i].ID == id {
			return &st.Sandboxes[i]
		}
	}
	return nil
}

func gracePeriod(pod *v1.Pod) int64 {
	// A pod deleted through the API server stops within the grace period
	// the deletion gave, which may be shorter than its spec's.
	if pod != nil && pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}
