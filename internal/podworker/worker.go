package podworker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/resize"
	"github.com/berth-dev/berth/internal/status"
)

// AnnotationPodCgroup shows, on the pods berth serves, the cgroupfs path of
// the pod's cgroup.
const AnnotationPodCgroup = "berth.dev/pod-cgroup"

// retryAfterError is how soon a worker retries a sync that failed on the
// runtime (not on the pod itself, which has its own back-offs).
const retryAfterError = 2 * time.Second

// worker owns the sync of one pod.
type worker struct {
	ws              *Workers
	uid             types.UID
	name, namespace string
	wakeCh          chan struct{}

	mu          sync.Mutex
	pod         *v1.Pod // desired spec; nil for an orphan
	terminating bool
	// revive is set when the pod is wanted again while it is being killed
	// (a manifest deleted and restored with the same content, so the same
	// UID): once the kill is done, the worker starts the pod afresh.
	revive bool
	// evicting is set once the pod is evicted or preempted: it stops for
	// good and keeps a terminal status until it is deleted.
	evicting *eviction
	// cancelSync ends the sync in flight, nil when none runs: a pod deleted
	// while it starts (pulls, a thousand containers, a postStart hook that
	// hangs) is stopped at once, as the kubelet's pod workers cancel the
	// running sync of a pod that turns terminating.
	cancelSync context.CancelFunc
	// runtimeChanged is set when a PLEG event for the pod comes, and taken
	// by the next sync (kept.go).
	runtimeChanged bool

	// Owned by the worker goroutine alone.
	waiting   map[string]status.Waiting
	syncError *status.Waiting
	published *v1.PodStatus
	admission admission
	// evicted is the terminal status an eviction left.
	evicted *v1.PodStatus
	// terminalChecked is set once the terminal store was asked whether the
	// pod was evicted before berth restarted.
	terminalChecked bool
	// lastSynced is the spec of the last sync, nil before the first.
	lastSynced *v1.Pod
	startup    startTracker
	// holdsStartSlot is set while a sync that creates the sandbox holds
	// one of Deps.ParallelPodStarts.
	holdsStartSlot bool
	// waitsForPredecessor is set while the pod waits for the pod of its
	// name that it replaces to stop (predecessor.go).
	waitsForPredecessor bool
	// volumesRefreshed is when refreshVolumes last ran.
	volumesRefreshed time.Time
	// resizePending is the last verdict of a resize not admitted, so
	// that its event is posted once.
	resizePending resize.Verdict
	// kept is the runtime status the last sync left (kept.go).
	kept keptStatus
}

func newWorker(ws *Workers, uid types.UID, name, namespace string) *worker {
	w := &worker{
		ws: ws, uid: uid, name: name, namespace: namespace,
		wakeCh:  make(chan struct{}, 1),
		waiting: map[string]status.Waiting{},
	}
	w.startup.begin(ws.deps.Clock.Now())
	return w
}

func (w *worker) setPod(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod
	if w.terminating {
		w.revive = true
	}
	w.mu.Unlock()
	w.wake()
}

func (w *worker) kill() {
	w.mu.Lock()
	w.terminating, w.revive = true, false
	if w.cancelSync != nil {
		w.cancelSync()
	}
	if w.evicting != nil {
		// Deleting the pod also ends its eviction.
		w.evicting.finish(nil)
	}
	w.mu.Unlock()
	w.wake()
}

// finishKill ends the worker after its pod is gone, unless the pod was
// wanted again meanwhile: then the worker lives on as a fresh one. It holds
// the set's lock so that an Update cannot slip between the check and the
// removal.
func (w *worker) finishKill() (exit bool) {
	w.ws.mu.Lock()
	defer w.ws.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.revive {
		w.terminating, w.revive = false, false
		w.published, w.syncError = nil, nil
		w.admission = admission{}
		w.evicting, w.evicted = nil, nil
		clear(w.waiting)
		return false
	}
	if w.ws.workers[w.uid] == w {
		delete(w.ws.workers, w.uid)
	}
	w.ws.wakeSuccessorsLocked(w)
	return true
}

// runtimeChange wakes the worker for a change the PLEG found in the
// pod's sandboxes or containers.
func (w *worker) runtimeChange() {
	w.mu.Lock()
	w.runtimeChanged = true
	w.mu.Unlock()
	w.wake()
}

// takeRuntimeChange reports whether a PLEG event came since the last
// sync took it, and clears it for the next one.
func (w *worker) takeRuntimeChange() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := w.runtimeChanged
	w.runtimeChanged = false
	return changed
}

func (w *worker) wake() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

func (w *worker) snapshot() (*v1.Pod, bool, *eviction) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.terminating, w.evicting
}

func (w *worker) run(ctx context.Context) {
	d := w.ws.deps
	log := d.Log.With("pod", w.namespace+"/"+w.name, "uid", w.uid)
	timer := d.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wakeCh:
		case <-timer.C():
		}
		pod, terminating, ev := w.snapshot()
		if !terminating && pod == nil {
			continue
		}
		op := syncOperation(pod, w.lastSynced, terminating, ev != nil)
		began := d.Clock.Now()
		var next time.Duration
		var killErr error
		switch {
		case terminating:
			w.kept = keptStatus{}
			killErr = w.terminate(ctx, pod, log)
		case ev != nil:
			w.kept = keptStatus{}
			next = w.evict(ctx, pod, ev, log)
		default:
			next = w.cancellableSync(ctx, pod, w.takeRuntimeChange(), log)
			w.lastSynced = pod
		}
		d.Metrics.synced(op, d.Clock.Since(began))
		if terminating {
			if killErr != nil {
				log.Warn("terminating pod failed; will retry", "err", killErr)
				next = retryAfterError
			} else if w.finishKill() {
				return
			} else {
				log.Info("pod wanted again; starting it afresh")
				w.lastSynced = nil
				w.startup.begin(d.Clock.Now())
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(next)
	}
}

// cancellableSync runs sync with a context that kill cancels. A kill that
// came before the sync began cancels it too: the sync then stops at its
// first runtime call and the loop goes on to terminate.
func (w *worker) cancellableSync(ctx context.Context, pod *v1.Pod, runtimeChanged bool, log *slog.Logger) time.Duration {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	if w.terminating {
		cancel()
	}
	w.cancelSync = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.cancelSync = nil
		w.mu.Unlock()
	}()
	return w.sync(ctx, pod, runtimeChanged, log)
}

// sync carries out one round of ComputePlan for pod and publishes its
// status; runtimeChanged tells whether a PLEG event came since the last
// sync began. It returns when the worker should sync again without an
// event.
func (w *worker) sync(ctx context.Context, pod *v1.Pod, runtimeChanged bool, log *slog.Logger) time.Duration {
	d := w.ws.deps
	if w.restoreEviction(pod, log) {
		return 0
	}
	st, readAt, err := w.podStatus(ctx, pod.UID, runtimeChanged)
	if err != nil {
		log.Warn("reading pod status from the runtime failed", "err", err)
		return retryAfterError
	}
	if w.admission.rejected != nil {
		// The Rejecter wrote its status; it never starts.
		return d.Resync
	}
	if w.published == nil {
		// Show the pod (Pending) before a first sync that may pull images
		// or wait for devices for minutes.
		w.publish(pod, st, false)
	}
	if !w.admission.done && len(st.Sandboxes) == 0 {
		if prev := w.ws.predecessor(w); prev != "" {
			// Woken when it is gone; the resync only guards against a
			// missed wake.
			if !w.waitsForPredecessor {
				log.Info("pod waits for the pod of the same name it replaces to stop", "predecessor", prev)
			}
			w.waitsForPredecessor = true
			w.explainPredecessorWait(ctx, pod, log)
			return d.Resync
		}
	}
	w.waitsForPredecessor = false
	if ok, after := w.admit(ctx, pod, st, log); !ok {
		if w.admission.rejected == nil {
			w.publish(pod, st, false)
		}
		return after
	}
	w.startup.admit(d.Clock.Now(), len(st.Sandboxes) > 0)
	deadline, stopped := w.checkDeadline(pod)
	if stopped {
		return 0
	}
	var probes ProbeResults
	if d.Probes != nil {
		probes = d.Probes
	}
	// The containers run with what is allocated to them, which differs
	// from the spec while a resize is not admitted.
	allocated := w.resizeAllocate(pod, log)
	restarts, resized := w.resizeRunning(ctx, allocated, st, log)
	if resized {
		if st, readAt, err = w.readPodStatus(ctx, pod.UID); err != nil {
			log.Warn("reading pod status from the runtime failed", "err", err)
			return retryAfterError
		}
	}
	plan := withResizeRestarts(ComputePlan(allocated, st, probes), restarts)
	log.Debug("sync", "plan", plan.String())
	w.refreshVolumes(ctx, allocated, st, plan, log)
	next := d.Resync
	if !plan.Idle() {
		var after time.Duration
		var changedAt time.Time
		if st, changedAt, after, err = w.applyAndObserve(ctx, allocated, st, plan, log); err != nil {
			log.Warn("reading pod status from the runtime failed", "err", err)
			return retryAfterError
		}
		if !changedAt.IsZero() {
			// A relist that began before the steps' last change may not
			// show what they made or removed: the kept status vouches for
			// nothing before it.
			readAt = changedAt
		}
		if after > 0 && after < next {
			next = after
		}
	}
	w.publish(pod, st, false)
	w.kept = keptStatus{st: st, at: readAt}
	if deadline > 0 && deadline < next {
		next = deadline
	}
	// The kubelet's moment of a pod's start: its phase turns Running.
	if w.published.Phase == v1.PodRunning {
		if s, ok := w.startup.running(d.Clock.Now()); ok {
			d.Metrics.podStarted(s)
		}
	}
	if d.Probes != nil {
		// After publishing: the probes find the new containers' IDs in the
		// status.
		d.Probes.AddPod(pod)
	}
	return next
}

// applyAndObserve carries out plan's steps, then reads back what they
// changed to publish it (observe): the read is the steps' results fed
// back. changedAt is when the steps were done, zero when they only waited
// out back-offs: they did no I/O, and the sync's snapshot still stands.
func (w *worker) applyAndObserve(ctx context.Context, pod *v1.Pod, st *container.PodStatus, plan Plan, log *slog.Logger) (_ *container.PodStatus, changedAt time.Time, after time.Duration, _ error) {
	after, ex := w.apply(ctx, pod, st, plan, log)
	if !ex.touched {
		return st, time.Time{}, after, nil
	}
	changedAt = w.ws.deps.Clock.Now()
	st, err := ex.observe(ctx)
	return st, changedAt, after, err
}

func (w *worker) publish(pod *v1.Pod, st *container.PodStatus, terminating bool) {
	d := w.ws.deps
	if w.published == nil {
		w.published = adoptedStatus(st)
	}
	ready, started := w.probeResults(pod, st)
	out := status.Generate(status.Input{
		Pod:         pod,
		Runtime:     st,
		Ready:       ready,
		Started:     started,
		Waiting:     w.waiting,
		SyncError:   w.syncError,
		HostIP:      d.HostIP,
		Previous:    w.published,
		Now:         d.Clock.Now(),
		Terminating: terminating,
		RuntimeName: d.RuntimeName,
	})
	if e := w.syncError; e != nil && e.Reason == devicemanager.ReasonDevicePluginNotReady && out.Phase == v1.PodPending {
		out.Reason, out.Message = e.Reason, e.Message
	}
	if d.Resize != nil {
		d.Resize.Decorate(pod, &out)
	}
	w.published = &out
	shown := pod
	if (terminating && pod.DeletionTimestamp == nil) || d.Cgroups != nil {
		shown = pod.DeepCopy()
	}
	if terminating && pod.DeletionTimestamp == nil {
		now := metav1.NewTime(d.Clock.Now())
		shown.DeletionTimestamp = &now
	}
	if d.Cgroups != nil {
		// The API has no field for it; an annotation shows users where
		// the pod's cgroup is.
		if shown.Annotations == nil {
			shown.Annotations = map[string]string{}
		}
		shown.Annotations[AnnotationPodCgroup] = d.Cgroups.CgroupParent(pod)
	}
	d.Status.Set(shown, out)
}

// adoptedStatus is the status to build on for a pod berth finds already
// running (after a restart): its start time is its first sandbox's, so
// AGE does not reset when berth does.
func adoptedStatus(st *container.PodStatus) *v1.PodStatus {
	if st == nil || len(st.Sandboxes) == 0 {
		return nil
	}
	first := st.Sandboxes[len(st.Sandboxes)-1].CreatedAt
	start := metav1.NewTime(first)
	return &v1.PodStatus{StartTime: &start}
}

// probeResults are the readiness and startup callbacks of status.Generate:
// a container with such a probe is ready (started) when its probe says so;
// one without is when it runs.
func (w *worker) probeResults(pod *v1.Pod, st *container.PodStatus) (ready, started func(string) bool) {
	probes := w.ws.deps.Probes
	if probes == nil || st == nil {
		return nil, nil
	}
	spec := func(id string) *v1.Container {
		for i := range st.Containers {
			if st.Containers[i].ID == id {
				return specContainer(pod, st.Containers[i].Name)
			}
		}
		return nil
	}
	ready = func(id string) bool {
		c := spec(id)
		return c == nil || c.ReadinessProbe == nil || probes.Ready(id)
	}
	started = func(id string) bool {
		c := spec(id)
		return c == nil || c.StartupProbe == nil || probes.Started(id)
	}
	return ready, started
}

// event records an event about pod, when berth records events.
func (w *worker) event(pod *v1.Pod, eventType, reason, message string) {
	if r := w.ws.deps.Events; r != nil && pod != nil {
		r.Event(pod, eventType, reason, message)
	}
}
