package podworker

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/pleg"
)

// Relists gives the PLEG's last relist; *pleg.PLEG implements it.
type Relists interface {
	LastRelist() pleg.Relist
}

// keptStatus is the pod's runtime status as the worker's last sync left
// it: read at the sync's start (at), with what the sync's own steps
// changed folded in. Only a sync that ran to its end keeps one; anything
// else the worker does to the pod (an eviction, a kill) drops it.
type keptStatus struct {
	st *container.PodStatus
	at time.Time
}

// podStatus is the pod's runtime status for a sync and when it was read.
// A sync takes the kept status when a relist that began after it was read,
// and is less than a resync period old, shows the pod unchanged: the
// runtime would answer with the same states, and every change of state
// after that relist wakes the worker again through a later one.
//
// It holds for a sync an event started as well as for the resync: every
// runtime change reaches a worker as a PLEG event, and the PLEG publishes
// a relist before the events it found in it, so the relist a sync sees is
// never older than the change that woke it. Other wakes (a spec change, a
// probe result, a predecessor gone) change nothing in the runtime. The
// kubelet's workers read their status from the PLEG's cache in the same
// way. Reading the runtime instead cost four or more CRI calls per sync:
// at start-up, where each pod's own changes come back to it as several
// events, about 4 ContainerStatus and 4 PodSandboxStatus calls per pod.
func (w *worker) podStatus(ctx context.Context, uid types.UID) (*container.PodStatus, time.Time, error) {
	d := w.ws.deps
	kept := w.kept
	w.kept = keptStatus{}
	if kept.st != nil && d.Relists != nil {
		r := d.Relists.LastRelist()
		if r.At.After(kept.at) && d.Clock.Since(r.At) < d.Resync && r.Shows(kept.st) {
			return kept.st, kept.at, nil
		}
	}
	return w.readPodStatus(ctx, uid)
}

// readPodStatus reads the pod's status from the runtime: where the sync
// changed what the relist does not compare (a resize's resources).
func (w *worker) readPodStatus(ctx context.Context, uid types.UID) (*container.PodStatus, time.Time, error) {
	d := w.ws.deps
	at := d.Clock.Now()
	st, err := d.Runtime.PodStatus(ctx, uid)
	return st, at, err
}
