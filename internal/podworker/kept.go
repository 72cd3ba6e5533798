package podworker

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/runtime"
)

// Relists gives the PLEG's last relist; *pleg.PLEG implements it.
type Relists interface {
	LastRelist() pleg.Relist
}

// keptStatus is the pod's runtime status as the worker's last sync left
// it: read at the sync's start, with what the sync's own steps changed
// folded in. at is when it is current from: the read, or the end of the
// steps when they changed something. Only a sync that ran to its end
// keeps one; anything else the worker does to the pod (an eviction, a
// kill) drops it.
type keptStatus struct {
	st *container.PodStatus
	at time.Time
}

// podStatus is the pod's runtime status for a sync and when it is as
// current as. When a relist that began after the kept status was read, and
// is less than a resync period old, shows the pod unchanged, the sync takes
// the kept status: the runtime would answer with the same states, and every
// change of state after that relist wakes the worker again through a later
// one. When the relist shows some sandboxes or containers changed, new or
// gone, the sync reads only those (refresh): the rest the relist vouches
// for.
//
// It holds for a sync an event started as well as for the resync: every
// runtime change reaches a worker as a PLEG event, and the PLEG publishes
// a relist before the events it found in it, so the relist a sync sees is
// never older than the change that woke it. The kubelet's workers read
// their status from the PLEG's cache, refreshed for the pods whose states
// changed, in the same way. Reading the whole pod instead costs two lists
// and a status call per sandbox and container: for a container's restart,
// five calls where one does.
//
// A sync that no PLEG event woke since the last one began (a probe result,
// a spec change, a back-off's timer) takes the kept status as it is, if it
// is less than a resync period old, whatever the relists: a change in the
// runtime after any part of it was read is found by a relist that ends
// after that read, and that relist's event comes after the last sync took
// its own (runtimeChanged), so the next sync is told. The kubelet's worker
// waits for a relist newer than its last sync instead (up to a second, the
// relist period): its cache has not read what that sync did, which the
// kept status has. At start-up this was a whole read (two lists and a
// status per sandbox and container) for each pod's readiness result.
func (w *worker) podStatus(ctx context.Context, uid types.UID, runtimeChanged bool) (*container.PodStatus, time.Time, error) {
	d := w.ws.deps
	kept := w.kept
	w.kept = keptStatus{}
	if kept.st != nil && d.Relists != nil {
		if !runtimeChanged && d.Clock.Since(kept.at) < d.Resync {
			return kept.st, kept.at, nil
		}
		r := d.Relists.LastRelist()
		if r.At.After(kept.at) && d.Clock.Since(r.At) < d.Resync {
			ch := r.Changes(kept.st)
			if ch.None() {
				return kept.st, kept.at, nil
			}
			st, err := w.refresh(ctx, kept.st, ch)
			if err == nil {
				return st, r.At, nil
			}
			d.Log.Debug("refreshing the pod's status failed; reading it whole", "pod", w.namespace+"/"+w.name, "err", err)
		}
	}
	if kept.st == nil && w.lastSynced == nil && d.Relists != nil {
		if st, at, ok := w.firstStatus(ctx, uid); ok {
			return st, at, nil
		}
	}
	return w.readPodStatus(ctx, uid)
}

// firstStatus is the status of a worker's first sync (or the first after
// its pod was killed and wanted again) from the last relist, if it is less
// than a resync period old: each sandbox and container the relist shows of
// the pod read one by one, none if it shows none (a new pod: no call at
// all, where reading the pod whole lists the runtime's sandboxes and
// containers). Nothing of the pod can be newer than the relist but what
// the worker made, and a worker that has not synced made nothing; what
// its kill removed since, the reads find gone. A later sync without a
// kept status (the last one failed after its steps) reads the pod whole:
// the relist may not show what that sync made. The kubelet's first sync
// of a pod reads the PLEG's cache, which holds nothing for a new pod, too.
func (w *worker) firstStatus(ctx context.Context, uid types.UID) (*container.PodStatus, time.Time, bool) {
	d := w.ws.deps
	r := d.Relists.LastRelist()
	if r.At.IsZero() || d.Clock.Since(r.At) >= d.Resync {
		return nil, time.Time{}, false
	}
	base := &container.PodStatus{UID: uid, Name: w.name, Namespace: w.namespace}
	st, err := w.refresh(ctx, base, r.Changes(base))
	if err != nil {
		d.Log.Debug("reading the pod's status from the last relist failed; reading it whole", "pod", w.namespace+"/"+w.name, "err", err)
		return nil, time.Time{}, false
	}
	return st, r.At, true
}

// refresh is st with what a relist showed changed read again: each sandbox
// and container it showed new or in another state, and without those it
// no longer showed or the runtime has removed since.
func (w *worker) refresh(ctx context.Context, st *container.PodStatus, ch pleg.Changes) (*container.PodStatus, error) {
	rt := w.ws.deps.Runtime
	goneSandboxes := slices.Clone(ch.GoneSandboxes)
	var sandboxes []container.SandboxStatus
	for _, id := range ch.Sandboxes {
		sb, err := rt.SandboxStatus(ctx, id)
		if runtime.IsNotFound(err) {
			goneSandboxes = append(goneSandboxes, id)
			continue
		}
		if err != nil {
			return nil, err
		}
		sandboxes = append(sandboxes, sb)
	}
	read, gone, err := readContainers(ctx, rt, ch.Containers)
	if err != nil {
		return nil, err
	}
	st = withSandboxes(st, sandboxes, goneSandboxes)
	return withContainers(st, read, append(slices.Clone(ch.GoneContainers), gone...)), nil
}

// readPodStatus reads the pod's status from the runtime: where the sync
// changed what the relist does not compare (a resize's resources).
func (w *worker) readPodStatus(ctx context.Context, uid types.UID) (*container.PodStatus, time.Time, error) {
	d := w.ws.deps
	at := d.Clock.Now()
	st, err := d.Runtime.PodStatus(ctx, uid)
	return st, at, err
}
