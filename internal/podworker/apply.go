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

// releaseStartSlot gives back the pod-start slot this sync holds, if any.
func (w *worker) releaseStartSlot() {
	if w.holdsStartSlot {
		w.holdsStartSlot = false
		w.ws.startSlots.release()
	}
}

// sandboxConfig builds the pod's sandbox config. The node's resolv.conf is
// read each time, as the kubelet's GetPodDNS does, so that a change to it
// reaches new sandboxes; a file that cannot be read fails the sandbox.
func (w *worker) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, []kuberuntime.DNSWarning, error) {
	d := w.ws.deps
	opts := kuberuntime.SandboxOptions{PodLogsDir: d.PodLogsDir, Attempt: attempt,
		ClusterDNS: d.ClusterDNS, ClusterDomain: d.ClusterDomain, NodeIPs: d.NodeIPs}
	if d.Cgroups != nil {
		opts.CgroupParent = d.Cgroups.CgroupParent(pod)
	}
	var err error
	if opts.UserNamespace, err = w.userNamespace(pod); err != nil {
		return nil, nil, err
	}
	hostDNS, err := kuberuntime.HostDNSConfig(d.ResolvConf)
	if err != nil {
		return nil, nil, err
	}
	return kuberuntime.SandboxConfig(pod, opts, hostDNS)
}

// userNamespace is the pod's user namespace, the same for its sandbox and
// every container (the kubelet asks GetOrCreateUserNamespaceMappings for
// each); nil, the node's, without a manager.
func (w *worker) userNamespace(pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	if w.ws.deps.UserNamespaces == nil {
		return nil, nil
	}
	return w.ws.deps.UserNamespaces.PodUserNamespace(pod)
}

// dnsWarnings records the warnings of forming the pod's resolver
// configuration, on the pod or on the node.
func (w *worker) dnsWarnings(pod *v1.Pod, warnings []kuberuntime.DNSWarning) {
	for _, dw := range warnings {
		if !dw.OnNode {
			w.event(pod, v1.EventTypeWarning, dw.Reason, dw.Message)
			continue
		}
		if r, ok := w.ws.deps.Events.(NodeEventRecorder); ok {
			r.NodeEvent(v1.EventTypeWarning, dw.Reason, dw.Message)
		}
	}
}

// containerConfig prepares what container c needs on the host and builds
// its CRI config: the steps of the kubelet's generateContainerConfig. Any
// error is a CreateContainerConfigError.
func (w *worker) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, init bool, restartCount int,
	image presentImage, imageVolumes map[string]*runtimeapi.ImageSpec, sb *container.SandboxStatus, targetID string) (*runtimeapi.ContainerConfig, kuberuntime.ContainerOptions, error) {
	d := w.ws.deps
	opts := kuberuntime.ContainerOptions{
		RestartCount:       restartCount,
		Init:               init,
		HostIP:             d.HostIP,
		NodeName:           d.NodeName,
		ImageRef:           image.ref,
		NodeAllocatable:    d.NodeAllocatable,
		NodeMemoryCapacity: d.NodeAllocatable.Memory().Value(),
		Memory:             d.Memory,
		SeccompProfileRoot: d.SeccompProfileRoot,
		TargetContainerID:  targetID,
		ImageVolumes:       imageVolumes,
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
	if d.DynamicResources != nil && usesClaims(pod) {
		if opts.ClaimCDIDevices, err = d.DynamicResources.ContainerCDIDevices(pod, c); err != nil {
			return nil, opts, err
		}
	}
	if err := w.prepareFiles(pod, c, &opts); err != nil {
		return nil, opts, err
	}
	if err := w.imageUser(ctx, pod, c, image.status, &opts); err != nil {
		return nil, opts, err
	}
	if opts.UserNamespace, err = w.userNamespace(pod); err != nil {
		return nil, opts, err
	}
	cfg, err := kuberuntime.ContainerConfig(pod, c, opts)
	return cfg, opts, err
}

// imageUser takes the user c's image runs as from the image's record (the
// one ensureImage read, else read now, as the kubelet reads it once the
// image is present) and refuses a container whose runAsNonRoot that user
// breaks. The refusal is returned unwrapped: its message is the kubelet's,
// word for word.
func (w *worker) imageUser(ctx context.Context, pod *v1.Pod, c *v1.Container, img *runtimeapi.Image, opts *kuberuntime.ContainerOptions) error {
	if img == nil {
		ref := opts.ImageRef
		if ref == "" {
			ref = c.Image
		}
		var err error
		if img, err = w.ws.deps.Runtime.ImageStatus(ctx, ref); err != nil {
			return fmt.Errorf("reading the user of image %q: %w", c.Image, err)
		}
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
	hosts, err := kuberuntime.HostsFile(pod, opts.PodIPs, d.ClusterDomain, d.NodeHosts)
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
func (w *worker) removeOldInstances(ctx context.Context, st *container.PodStatus, name string, log *slog.Logger) (removed []string) {
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
			continue
		}
		removed = append(removed, cs.ID)
	}
	return removed
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
