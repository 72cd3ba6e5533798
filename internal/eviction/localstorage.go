package eviction

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// The kubelet's messages of a pod evicted for going past its own local
// storage limits, trailing spaces included.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// The signals the kubelet counts these evictions under (the eviction_signal
// label of kubelet_evictions): they are limits of one pod, not thresholds
// of the node, so they are never configured and never set a condition.
const (
	SignalEmptyDirFsLimit           Signal = "emptydirfs.limit"
	SignalEphemeralPodFsLimit       Signal = "ephemeralpodfs.limit"
	SignalEphemeralContainerFsLimit Signal = "ephemeralcontainerfs.limit"
)

// localStorageViolation is why a pod must go for the local storage it uses
// against its own limits.
type localStorageViolation struct {
	signal  Signal
	message string
}

// checkLocalStorage says whether pod is past one of its local storage
// limits, in the kubelet's order: an emptyDir past its sizeLimit, then the
// pod past the sum of its containers' ephemeral-storage limits, then a
// container past its own. withImageFs says the containers' writable layers
// are on a filesystem of their own, which a container's limit then does
// not cover (as in the kubelet).
func checkLocalStorage(pod *v1.Pod, stats statsapi.PodStats, withImageFs bool) (localStorageViolation, bool) {
	if v, ok := emptyDirViolation(pod, stats); ok {
		return v, true
	}
	if v, ok := podEphemeralStorageViolation(pod, stats); ok {
		return v, true
	}
	return containerEphemeralStorageViolation(pod, stats, withImageFs)
}

// emptyDirViolation is the first emptyDir, in the pod's order, whose usage
// is over a positive sizeLimit. As in the kubelet, this holds for every
// emptyDir that was measured, a medium Memory one too; berth mounts that
// one as a tmpfs of sizeLimit, which it cannot outgrow.
func emptyDirViolation(pod *v1.Pod, stats statsapi.PodStats) (localStorageViolation, bool) {
	used := make(map[string]uint64, len(stats.VolumeStats))
	for _, vs := range stats.VolumeStats {
		if vs.UsedBytes != nil {
			used[vs.Name] = *vs.UsedBytes
		}
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.EmptyDir == nil {
			continue
		}
		size := vol.EmptyDir.SizeLimit
		u, ok := used[vol.Name]
		if !ok || size == nil || size.Sign() <= 0 {
			continue
		}
		if resource.NewQuantity(int64(u), resource.BinarySI).Cmp(*size) > 0 {
			return localStorageViolation{
				signal:  SignalEmptyDirFsLimit,
				message: fmt.Sprintf(emptyDirMessageFmt, vol.Name, size.String()),
			}, true
		}
	}
	return localStorageViolation{}, false
}

// podEphemeralStorageViolation compares the pod's whole ephemeral storage
// (writable layers, logs, disk-backed emptyDirs, its /etc/hosts) with the
// pod's ephemeral-storage limit as the scheduler sums it. As in the
// kubelet, that limit exists once any container has one, and is then the
// sum of those that do.
func podEphemeralStorageViolation(pod *v1.Pod, stats statsapi.PodStats) (localStorageViolation, bool) {
	limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]
	if !ok {
		return localStorageViolation{}, false
	}
	var used uint64
	if es := stats.EphemeralStorage; es != nil && es.UsedBytes != nil {
		used = *es.UsedBytes
	}
	if resource.NewQuantity(int64(used), resource.BinarySI).Cmp(limit) > 0 {
		return localStorageViolation{
			signal:  SignalEphemeralPodFsLimit,
			message: fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()),
		}, true
	}
	return localStorageViolation{}, false
}

// containerEphemeralStorageViolation is the first running container whose
// logs, and writable layer unless that is on the image filesystem, are
// over its own non-zero ephemeral-storage limit. Init containers are not
// checked, as in the kubelet: they are not running when this looks.
func containerEphemeralStorageViolation(pod *v1.Pod, stats statsapi.PodStats, withImageFs bool) (localStorageViolation, bool) {
	limits := map[string]resource.Quantity{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if l, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for _, cs := range stats.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		used := fsUsage(cs.Logs, v1.ResourceEphemeralStorage)
		if !withImageFs {
			used.Add(fsUsage(cs.Rootfs, v1.ResourceEphemeralStorage))
		}
		if used.Cmp(limit) > 0 {
			return localStorageViolation{
				signal:  SignalEphemeralContainerFsLimit,
				message: fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, limit.String()),
			}, true
		}
	}
	return localStorageViolation{}, false
}

// localStorageEviction evicts every active pod past its own local storage
// limits (the kubelet's localStorageEviction, which runs before the node's
// thresholds are acted on): such a pod goes whether or not the node is
// short of disk. It returns the last pod evicted, if any; critical pods
// are spared, as they are for node pressure.
func (m *Manager) localStorageEviction(ctx context.Context, pods []*v1.Pod, stats statsFunc) (*v1.Pod, error) {
	var evicted *v1.Pod
	var errs []error
	for _, pod := range pods {
		ps, ok := stats(pod)
		if !ok {
			continue
		}
		v, over := checkLocalStorage(pod, ps, m.withImageFs)
		if !over {
			continue
		}
		if v1helper.IsCriticalPod(pod) {
			m.log.Error("Eviction manager: cannot evict a critical pod", "pod", podName(pod), "message", v.message)
			continue
		}
		m.metrics.evictions.WithLabelValues(string(v.signal)).Inc()
		// The kubelet adds no DisruptionTarget condition here: the pod was
		// not disrupted, it broke its own limit.
		status := v1.PodStatus{Phase: v1.PodFailed, Reason: Reason, Message: v.message}
		if err := m.evictWithStatus(ctx, pod, v.signal, v1.ResourceEphemeralStorage, immediateEvictionGracePeriodSeconds, v.message, nil, status); err != nil {
			errs = append(errs, err)
		}
		evicted = pod
	}
	return evicted, errors.Join(errs...)
}
