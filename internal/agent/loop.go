package agent

import (
	"context"
	"log/slog"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/podworker"
	"github.com/berth-dev/berth/internal/status"
)

// podEntry is one desired pod, keyed by namespace/name.
type podEntry struct {
	pod *v1.Pod
	// rejected is why the pod was not admitted, or "" when it runs.
	rejected string
}

// syncLoop is the single owner of the desired pod set: it applies manifest
// snapshots and PLEG events to the pod workers.
type syncLoop struct {
	cfg      *config.Config
	log      *slog.Logger
	workers  *podworker.Workers
	statuses *status.Manager
	pleg     *pleg.PLEG

	// Owned by run; the mutex only guards reads from the local API.
	mu          sync.RWMutex
	desired     map[string]*podEntry
	manifestErr []podsource.ManifestError
	sourceReady bool
	// runtime is every pod the last relists saw, by UID.
	runtime map[string]pleg.Event
}

func (l *syncLoop) run(ctx context.Context, snapshots <-chan podsource.Snapshot, events <-chan pleg.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case snap := <-snapshots:
			l.applySnapshot(snap)
			l.killOrphans()
		case ev := <-events:
			l.applyEvent(ev)
		}
	}
}

// applySnapshot diffs the new desired set against the old one: new UIDs
// start, vanished UIDs are killed, and an edited manifest (same name, new
// UID) is both.
func (l *syncLoop) applySnapshot(snap podsource.Snapshot) {
	next := map[string]*podEntry{}
	admitted := 0
	for _, pod := range snap.Pods {
		e := &podEntry{pod: pod}
		if admitted >= int(l.cfg.MaxPods) {
			e.rejected = "OutOfpods"
		} else {
			admitted++
		}
		next[key(pod)] = e
	}
	l.mu.Lock()
	prev := l.desired
	l.desired, l.manifestErr, l.sourceReady = next, snap.Errors, true
	l.mu.Unlock()

	for k, old := range prev {
		if cur, ok := next[k]; !ok || cur.pod.UID != old.pod.UID || cur.rejected != "" {
			if old.rejected == "" {
				l.log.Info("pod removed from manifests; killing it", "pod", k, "uid", old.pod.UID)
				l.workers.Kill(old.pod.UID, old.pod.Name, old.pod.Namespace)
			}
		}
	}
	for k, e := range next {
		if e.rejected != "" {
			l.log.Warn("pod rejected", "pod", k, "reason", e.rejected, "maxPods", l.cfg.MaxPods)
			continue
		}
		if old, ok := prev[k]; ok && old.pod.UID == e.pod.UID && old.rejected == "" {
			continue
		}
		l.log.Info("pod added", "pod", k, "uid", e.pod.UID)
		l.workers.Update(e.pod)
	}
	for _, me := range snap.Errors {
		l.log.Error("invalid manifest", "err", me.Error())
	}
}

// applyEvent wakes the pod's worker, or kills the pod when berth no longer
// wants it (a manifest deleted while berth was down).
func (l *syncLoop) applyEvent(ev pleg.Event) {
	if ev.Gone {
		delete(l.runtime, string(ev.UID))
	} else {
		l.runtime[string(ev.UID)] = ev
	}
	if l.workers.Has(ev.UID) {
		l.workers.Notify(ev.UID)
		return
	}
	if !ev.Gone {
		l.killOrphans()
	}
}

// killOrphans kills every pod the runtime has that no manifest wants. It
// waits for the first manifest snapshot: before it, every pod looks orphaned.
func (l *syncLoop) killOrphans() {
	if !l.sourceReady {
		return
	}
	wanted := map[types.UID]bool{}
	for _, e := range l.desired {
		if e.rejected == "" {
			wanted[e.pod.UID] = true
		}
	}
	for uid, ev := range l.runtime {
		if wanted[types.UID(uid)] || l.workers.Has(types.UID(uid)) {
			continue
		}
		l.log.Info("pod in the runtime has no manifest; killing it", "pod", ev.Namespace+"/"+ev.Name, "uid", uid)
		l.workers.Kill(types.UID(uid), ev.Name, ev.Namespace)
	}
}

// pods returns every pod berth knows, with status: running pods from the
// status manager, plus rejected pods and invalid manifests as Failed pods.
func (l *syncLoop) pods() []v1.Pod {
	out := l.statuses.Pods()
	seen := map[string]bool{}
	for i := range out {
		seen[key(&out[i])] = true
	}
	l.mu.RLock()
	for k, e := range l.desired {
		if e.rejected != "" && !seen[k] {
			p := e.pod.DeepCopy()
			p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: e.rejected,
				Message: "Pod was rejected: the node already runs maxPods pods"}
			out = append(out, *p)
		}
	}
	for _, me := range l.manifestErr {
		out = append(out, manifestErrorPod(me))
	}
	l.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return key(&out[i]) < key(&out[j]) })
	return out
}

// manifestErrorPod shows a broken manifest as a Failed pod, so `berth pods`
// and the API report it where users look for their pods.
func manifestErrorPod(me podsource.ManifestError) v1.Pod {
	p := v1.Pod{}
	p.APIVersion, p.Kind = "v1", "Pod"
	p.Name, p.Namespace = me.Name, me.Namespace
	p.Annotations = map[string]string{
		"kubernetes.io/config.source": "file",
		"berth.dev/manifest-path":     me.Path,
	}
	p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "InvalidManifest", Message: me.Error()}
	return p
}

func key(p *v1.Pod) string { return p.Namespace + "/" + p.Name }
