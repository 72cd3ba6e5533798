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
// A sync that only its timer started (the resync, a back-off's expiry)
// takes the kept status when a relist that began after it was read, and is
// less than a resync period old, shows the pod unchanged: the runtime would
// answer with the same states, and every change of state wakes the worker
// through the PLEG anyway. The kubelet's workers read their status from
// the PLEG's cache in the same way; berth's resync used to read each quiet
// pod from the runtime once a minute, four or more CRI calls, about 7 a
// second at 100 pods. Any other sync reads the runtime.
func (w *worker) podStatus(ctx context.Context, uid types.UID, timed bool) (*container.PodStatus, time.Time, error) {
	d := w.ws.deps
	kept := w.kept
	w.kept = keptStatus{}
	if timed && kept.st != nil && d.Relists != nil {
		r := d.Relists.LastRelist()
		if r.At.After(kept.at) && d.Clock.Since(r.At) < d.Resync && r.Shows(kept.st) {
			return kept.st, kept.at, nil
		}
	}
	at := d.Clock.Now()
	st, err := d.Runtime.PodStatus(ctx, uid)
	return st, at, err
}

// timedOut tells whether the worker's timer alone started this round: no
// wake (a spec change, a PLEG event, a probe result) is pending. A pending
// wake is taken, since the round serves it.
func (w *worker) timedOut() bool {
	select {
	case <-w.wakeCh:
		return false
	default:
		return true
	}
}
