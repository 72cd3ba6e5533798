package podworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// eviction is a request to stop a pod for good, as the kubelet's eviction
// and preemption do: its containers stop with the given grace period, its
// volumes and cgroup go, and its status stays at the given terminal one
// (Failed, reason Evicted or Preempting) until the pod is deleted. Its
// containers are left for the container GC, which removes those of evicted
// pods.
type eviction struct {
	grace  int64
	status v1.PodStatus

	once sync.Once
	done chan struct{}
	err  error
}

func (e *eviction) finish(err error) {
	e.once.Do(func() {
		e.err = err
		close(e.done)
	})
}

// Why Evict could not stop a pod.
var (
	// ErrNoPod: berth has no such pod (any more).
	ErrNoPod = errors.New("no such pod")
	// ErrPodDeleted: the pod is being deleted, which stops it anyway.
	ErrPodDeleted = errors.New("the pod is being deleted")
)

// Evict stops the pod with uid with the grace period in seconds and sets its
// status to status for good. It returns when the pod's containers are
// stopped, or when ctx is done. Evicting a pod twice waits for the first
// eviction.
func (ws *Workers) Evict(ctx context.Context, uid types.UID, grace int64, status v1.PodStatus) error {
	ws.mu.Lock()
	w := ws.workers[uid]
	ws.mu.Unlock()
	if w == nil {
		return fmt.Errorf("pod %s: %w", uid, ErrNoPod)
	}
	w.mu.Lock()
	if w.terminating {
		w.mu.Unlock()
		return fmt.Errorf("pod %s: %w", uid, ErrPodDeleted)
	}
	ev := w.evicting
	if ev == nil {
		ev = &eviction{grace: grace, status: status, done: make(chan struct{})}
		w.evicting = ev
	}
	w.mu.Unlock()
	w.wake()
	select {
	case <-ev.done:
		return ev.err
	case <-ctx.Done():
		return fmt.Errorf("evicting pod %s: %w", uid, ctx.Err())
	}
}

// evict carries out an eviction: once the containers are stopped, the pod
// shows its terminal status and the worker only keeps showing it.
func (w *worker) evict(ctx context.Context, pod *v1.Pod, ev *eviction, log *slog.Logger) time.Duration {
	d := w.ws.deps
	if w.evicted != nil {
		d.Status.Set(pod, *w.evicted)
		return d.Resync
	}
	st, err := d.Runtime.PodStatus(ctx, pod.UID)
	if err != nil {
		log.Warn("reading pod status from the runtime failed", "err", err)
		return retryAfterError
	}
	log.Info("evicting pod", "reason", ev.status.Reason, "gracePeriod", ev.grace)
	// Recorded first: a berth killed halfway through finishes the eviction
	// when it starts again, rather than starting the pod.
	w.persistTerminal(pod, ev.status, log)
	if d.Probes != nil {
		d.Probes.StopLivenessAndStartup(pod)
	}
	if err := w.stopPod(ctx, pod, st, &ev.grace, log); err != nil {
		log.Warn("stopping the evicted pod failed; will retry", "err", err)
		return retryAfterError
	}
	if st, err = d.Runtime.PodStatus(ctx, pod.UID); err != nil {
		log.Warn("reading pod status from the runtime failed", "err", err)
		return retryAfterError
	}
	if err := w.unprepareResources(ctx); err != nil {
		// The claims stay prepared until the pod is gone (terminate, or
		// the housekeeping of claims whose pods are gone).
		log.Warn("unpreparing the evicted pod's dynamic resources failed", "err", err)
	}
	// What the pod's containers wrote to its volumes is what eviction means
	// to free; the kubelet tears down the volumes of terminated pods too.
	if err := d.Volumes.TearDown(ctx, pod.UID); err != nil {
		log.Warn("tearing down the volumes of the evicted pod failed", "err", err)
	}
	if d.UserNamespaces != nil { // stopped for good, as the kubelet releases a terminated pod's
		d.UserNamespaces.Release(pod.UID)
	}
	if d.Cgroups != nil {
		killed, err := d.Cgroups.RemovePod(pod.UID)
		w.stragglersKilled(pod, killed, log)
		if err != nil {
			log.Warn("removing the cgroup of the evicted pod failed", "err", err)
		}
	}
	if d.Probes != nil {
		d.Probes.RemovePod(pod)
	}
	w.publish(pod, st, false)
	final := terminalStatus(*w.published, ev.status)
	w.evicted = &final
	w.persistTerminal(pod, final, log)
	d.Status.Set(pod, final)
	ev.finish(nil)
	return d.Resync
}

// terminalStatus is the last status of a stopped pod with the phase, reason,
// message and conditions an eviction gives it.
func terminalStatus(last, ev v1.PodStatus) v1.PodStatus {
	out := *last.DeepCopy()
	out.Phase, out.Reason, out.Message = ev.Phase, ev.Reason, ev.Message
	for _, c := range ev.Conditions {
		replaced := false
		for i := range out.Conditions {
			if out.Conditions[i].Type == c.Type {
				out.Conditions[i], replaced = c, true
			}
		}
		if !replaced {
			out.Conditions = append(out.Conditions, c)
		}
	}
	for i := range out.Conditions {
		if t := out.Conditions[i].Type; t == v1.PodReady || t == v1.ContainersReady {
			out.Conditions[i].Status = v1.ConditionFalse
			out.Conditions[i].Reason = "PodFailed"
		}
	}
	return out
}

// restoreEviction carries on with an eviction recorded before berth
// restarted, once per worker. It reports whether there was one.
func (w *worker) restoreEviction(pod *v1.Pod, log *slog.Logger) bool {
	d := w.ws.deps
	if w.terminalChecked || d.Terminal == nil {
		return false
	}
	w.terminalChecked = true
	st, ok := d.Terminal.Get(pod.UID)
	if !ok {
		return false
	}
	log.Info("pod was stopped for good before berth restarted; keeping it stopped", "reason", st.Reason)
	w.mu.Lock()
	if w.evicting == nil {
		w.evicting = &eviction{grace: minGracePeriod, status: st, done: make(chan struct{})}
	}
	w.mu.Unlock()
	return true
}

func (w *worker) persistTerminal(pod *v1.Pod, st v1.PodStatus, log *slog.Logger) {
	if t := w.ws.deps.Terminal; t != nil {
		if err := t.Put(pod.UID, st); err != nil {
			log.Warn("recording the evicted pod failed; a restart of berth would start it again", "err", err)
		}
	}
}
