package podworker

import (
	"context"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/events"
)

// A pod replaced by one of the same namespace and name (a manifest edited,
// a pod applied again, or one found in the runtime after berth restarted
// while its successor waits in the manifests) is stopped before its
// successor is admitted: the kubelet holds back a static pod until the
// one of its full name has terminated (podWorkers.allowStaticPodStart).
// berth holds back every pod so, for two reasons. Its sources key pods by
// full name, so two of one name are always predecessor and successor. And
// a terminating pod keeps its devices until its containers are gone (the
// kubelet frees them as soon as the pod leaves its pod manager, and may
// give a device that a dying container still uses): admitted at once, a
// successor that needs the same devices would be rejected for want of
// them, as make chaos showed after a kill -9 of berth amid such a replace.

// predecessor returns the UID of a terminating pod of w's namespace and
// name, other than w's, or "" when there is none.
func (ws *Workers) predecessor(w *worker) types.UID {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for uid, o := range ws.workers {
		if o == w || o.name != w.name || o.namespace != w.namespace {
			continue
		}
		o.mu.Lock()
		terminating := o.terminating
		o.mu.Unlock()
		if terminating {
			return uid
		}
	}
	return ""
}

// wakeSuccessorsLocked wakes the workers of w's namespace and name but w's,
// once w's pod is gone: a successor waiting for it may now be admitted.
// ws.mu is held.
func (ws *Workers) wakeSuccessorsLocked(w *worker) {
	for _, o := range ws.workers {
		if o != w && o.name == w.name && o.namespace == w.namespace {
			o.wake()
		}
	}
}

// explainPredecessorWait tells, while a pod waits for its predecessor,
// what would stop its ResourceClaims from being prepared: above all a
// claim of the same name made again while the force-deleted predecessor
// still has the old one prepared. The kubelet, which does not hold the pod
// back, tries to prepare it and posts that as FailedPrepareDynamicResources
// until the old claim is unprepared; berth posts the same event at each
// resync of the wait, so that the user sees why the pod stays Pending.
func (w *worker) explainPredecessorWait(ctx context.Context, pod *v1.Pod, log *slog.Logger) {
	d := w.ws.deps
	if d.DynamicResources == nil || !usesClaims(pod) {
		return
	}
	if err := d.DynamicResources.CheckResources(ctx, pod); err != nil {
		log.Info("the pod's dynamic resources cannot be prepared yet", "err", err)
		w.event(pod, v1.EventTypeWarning, events.FailedPrepareDynamicResources, "Failed to prepare dynamic resources: "+err.Error())
	}
}
