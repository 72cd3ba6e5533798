package podworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/v1helper"
)

// minGracePeriod is the kubelet's floor: a container always gets 2 s to stop
// after its preStop hook, even when the hook used up the grace period.
const minGracePeriod = 2

// stopContainer runs the container's preStop hook (when the spec is known)
// within the grace period, then asks the runtime to stop it with what is left.
func (w *worker) stopContainer(ctx context.Context, pod *v1.Pod, id, name string, grace int64, log *slog.Logger) error {
	return w.stopContainerInOrder(ctx, pod, id, name, grace, nil, log)
}

// stopContainerInOrder is stopContainer where the stop signal waits, after
// the preStop hook and within the grace period, for the containers order
// says must stop first.
func (w *worker) stopContainerInOrder(ctx context.Context, pod *v1.Pod, id, name string, grace int64, order *terminationOrder, log *slog.Logger) error {
	d := w.ws.deps
	// Whatever happens, the containers waiting for this one go on.
	defer order.stopped(name)
	if c := specContainer(pod, name); c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		start := d.Clock.Now()
		podIP := ""
		if w.published != nil {
			podIP = w.published.PodIP
		}
		if err := runHandler(ctx, d.Runtime, w.ws.httpHooks, c.Lifecycle.PreStop, pod, c, id, podIP, time.Duration(grace)*time.Second); err != nil {
			w.event(pod, v1.EventTypeWarning, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %v", err))
			log.Warn("preStop hook failed", "container", name, "err", err)
		}
		grace = atLeastMinGrace(grace - int64(d.Clock.Since(start)/time.Second))
	}
	if waited := order.waitForTurn(name, grace); waited > 0 {
		grace = atLeastMinGrace(grace - waited)
	}
	if err := d.Runtime.StopContainer(ctx, id, grace); err != nil && !runtime.IsNotFound(err) {
		return fmt.Errorf("stop container %s (%s): %w", name, id, err)
	}
	return nil
}

// atLeastMinGrace is what is left of a grace period that a hook or the
// wait for other containers used, but never less than minGracePeriod.
func atLeastMinGrace(left int64) int64 {
	return max(left, minGracePeriod)
}

// stopPod stops every active container, in parallel as the kubelet does
// but with sidecars last (terminationOrder), then every sandbox. It removes
// nothing, so statuses and logs stay. A non-nil graceOverride replaces the
// pod's grace period (an eviction's).
func (w *worker) stopPod(ctx context.Context, pod *v1.Pod, st *container.PodStatus, graceOverride *int64, log *slog.Logger) error {
	active := st.ActiveContainers()
	errs := make([]error, len(active))
	names := make([]string, len(active))
	for i, cs := range active {
		names[i] = cs.Name
	}
	order := newTerminationOrder(w.ws.deps.Clock, pod, names)
	var wg sync.WaitGroup
	for i, cs := range active {
		grace := gracePeriod(pod)
		if pod == nil && cs.TerminationGracePeriod > 0 {
			grace = cs.TerminationGracePeriod
		}
		if graceOverride != nil {
			grace = *graceOverride
		}
		w.event(pod, v1.EventTypeNormal, "Killing", "Stopping container "+cs.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.stopContainerInOrder(ctx, pod, cs.ID, cs.Name, grace, order, log)
		}()
	}
	wg.Wait()
	for _, sb := range st.Sandboxes {
		if !sb.Ready {
			continue
		}
		if err := w.ws.deps.Runtime.StopPodSandbox(ctx, sb.ID); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.ID, err))
		}
	}
	return errors.Join(errs...)
}

// terminate stops and removes everything the pod has in the runtime and on
// disk, then drops its status. pod is nil for an orphan.
func (w *worker) terminate(ctx context.Context, pod *v1.Pod, log *slog.Logger) error {
	d := w.ws.deps
	st, err := d.Runtime.PodStatus(ctx, w.uid)
	if err != nil {
		return fmt.Errorf("read pod status: %w", err)
	}
	if pod != nil {
		w.publish(pod, st, true)
		if d.Probes != nil {
			d.Probes.StopLivenessAndStartup(pod)
		}
	}
	log.Info("killing pod", "containers", len(st.ActiveContainers()))
	if err := w.stopPod(ctx, pod, st, nil, log); err != nil {
		return err
	}
	if err := w.unprepareResources(ctx); err != nil {
		return err
	}
	if pod != nil {
		// The status after the kill (containers terminated, the phase
		// terminal) is the pod's last word, as the kubelet's
		// syncTerminatingPod reports it before the pod goes.
		if st, err = d.Runtime.PodStatus(ctx, w.uid); err != nil {
			return fmt.Errorf("read pod status: %w", err)
		}
		w.publish(pod, st, true)
	}
	var errs []error
	for _, cs := range st.Containers {
		if err := d.Runtime.RemoveContainer(ctx, cs.ID); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", cs.ID, err))
		}
	}
	for _, sb := range st.Sandboxes {
		if err := d.Runtime.RemovePodSandbox(ctx, sb.ID); err != nil && !runtime.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.ID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := d.Volumes.TearDown(ctx, w.uid); err != nil {
		return fmt.Errorf("tear down volumes: %w", err)
	}
	if d.UserNamespaces != nil { // its sandboxes are gone: the IDs are free
		d.UserNamespaces.Release(w.uid)
	}
	if d.Cgroups != nil {
		killed, err := d.Cgroups.RemovePod(w.uid)
		w.stragglersKilled(pod, killed, log)
		if err != nil {
			return err
		}
	}
	name, ns := w.name, w.namespace
	if st.Name != "" {
		name, ns = st.Name, st.Namespace
	}
	if err := os.RemoveAll(filepath.Join(d.PodLogsDir, ns+"_"+name+"_"+string(w.uid))); err != nil {
		log.Warn("removing pod logs failed", "err", err)
	}
	if pod != nil && d.Probes != nil {
		d.Probes.RemovePod(pod)
	}
	if d.Terminal != nil {
		if err := d.Terminal.Delete(w.uid); err != nil {
			log.Warn("forgetting the evicted pod failed", "err", err)
		}
	}
	if d.Resize != nil {
		if err := d.Resize.RemovePod(w.uid); err != nil {
			log.Warn("forgetting the pod's allocation failed", "err", err)
		}
	}
	if !(d.KeepDeletedStatuses && deletedThroughAPI(pod)) {
		d.Status.Delete(w.uid)
	}
	log.Info("pod removed")
	return nil
}

// unprepareResources unprepares the pod's ResourceClaims once its
// containers have stopped and before its terminal status goes out, as the
// kubelet's SyncTerminatingPod does: the scheduler may hand the devices to
// another pod as soon as the claim is released. An error keeps the pod
// terminating, to be tried again.
func (w *worker) unprepareResources(ctx context.Context) error {
	d := w.ws.deps
	w.ws.prepareBackOff.Reset(string(w.uid))
	w.ws.prepareBackOff.Reset(volumeBackOffKey(w.uid))
	if d.DynamicResources == nil {
		return nil
	}
	if err := d.DynamicResources.UnpreparePod(ctx, w.uid); err != nil {
		return fmt.Errorf("unprepare dynamic resources: %w", err)
	}
	return nil
}

// ReasonKilledStragglers is the event of a pod whose cgroup still held
// processes once its containers were gone. The kubelet kills them without
// a word; berth says so, since such a process escaped the pod's containers.
const ReasonKilledStragglers = "KilledStragglers"

// stragglersKilled tells, on the pod, that processes left in its cgroup
// were killed. pod is nil for an orphan, which has only the log.
func (w *worker) stragglersKilled(pod *v1.Pod, pids []int, log *slog.Logger) {
	if len(pids) == 0 {
		return
	}
	log.Warn("killed processes left in the pod cgroup", "pids", pids)
	w.event(pod, v1.EventTypeWarning, ReasonKilledStragglers,
		fmt.Sprintf("Killed %d process(es) left in the pod cgroup after its containers stopped: pids %v", len(pids), pids))
}

// deletedThroughAPI reports a pod of the API server that it deleted.
func deletedThroughAPI(pod *v1.Pod) bool {
	return pod != nil && pod.DeletionTimestamp != nil && !v1helper.IsStaticPod(pod)
}

func specContainer(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
