package podsource

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Merge joins the static pods of the manifest directory and the pods of the
// Store into the one Snapshot the sync loop reads. It sends nothing until
// both sources have sent their first snapshot: before that, a pod of the
// silent source would look unwanted and be killed.
type Merge struct {
	storeDir string
	log      *slog.Logger
	// ready is closed once the first static snapshot is in.
	ready chan struct{}

	mu     sync.RWMutex
	static map[string]bool // namespace/name of each static pod
}

// NewMerge returns a Merge for a Store in storeDir. A nil logger discards.
func NewMerge(storeDir string, log *slog.Logger) *Merge {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Merge{storeDir: storeDir, log: log, ready: make(chan struct{})}
}

// Run reads static and API snapshots and sends their merge on out whenever
// it changes, keeping only the newest undelivered one. It returns when ctx
// is done and does not close out. One Run per Merge.
func (m *Merge) Run(ctx context.Context, static, api <-chan Snapshot, out chan<- Snapshot) {
	st := merger{storeDir: m.storeDir}
	var (
		last    Snapshot
		pending bool // last has not been delivered
	)
	for {
		var send chan<- Snapshot
		if pending {
			send = out
		}
		var (
			next    Snapshot
			changed bool
		)
		select {
		case <-ctx.Done():
			return
		case s := <-static:
			m.publishStatic(s, !st.haveStatic)
			next, changed = st.setStatic(s)
		case s := <-api:
			next, changed = st.setAPI(s)
		case send <- last:
			pending = false
		}
		if changed {
			m.logConflicts(last, next, st.static, st.api)
			last, pending = next, true
		}
	}
}

// merger is Run's state: the newest snapshot of each source and the merge
// last made of them.
type merger struct {
	storeDir            string
	static, api         Snapshot
	haveStatic, haveAPI bool
	// last is also the receiver's; only its names, UIDs and errors are
	// read, to tell a change.
	last   Snapshot
	merged bool // last holds a merge
}

// setStatic takes the manifest directory's newest snapshot and returns the
// merge to send, if there is a new one.
func (st *merger) setStatic(s Snapshot) (Snapshot, bool) {
	st.static, st.haveStatic = s, true
	return st.remerge()
}

// setAPI takes the store's newest snapshot, as setStatic.
func (st *merger) setAPI(s Snapshot) (Snapshot, bool) {
	st.api, st.haveAPI = s, true
	return st.remerge()
}

// remerge merges once both sources have spoken, and reports a merge only
// when it differs from the last.
func (st *merger) remerge() (Snapshot, bool) {
	if !st.haveStatic || !st.haveAPI {
		return Snapshot{}, false
	}
	next := mergeSnapshots(st.static, st.api, st.storeDir)
	if st.merged && next.Equal(st.last) {
		return Snapshot{}, false
	}
	st.last, st.merged = next, true
	return next, true
}

// publishStatic keeps the static pods' names for IsStatic.
func (m *Merge) publishStatic(s Snapshot, first bool) {
	names := make(map[string]bool, len(s.Pods))
	for _, p := range s.Pods {
		names[p.Namespace+"/"+p.Name] = true
	}
	m.mu.Lock()
	m.static = names
	m.mu.Unlock()
	if first {
		close(m.ready)
	}
}

// IsStatic reports whether a static pod of the manifest directory has this
// name. It waits for the directory's first snapshot, or fails with ctx.
func (m *Merge) IsStatic(ctx context.Context, namespace, name string) (bool, error) {
	select {
	case <-m.ready:
	case <-ctx.Done():
		return false, fmt.Errorf("the manifest directory has not been read yet: %w", context.Cause(ctx))
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.static[namespace+"/"+name], nil
}

// logConflicts logs each API pod that a static pod newly shadows: the
// errors of the merge that neither the last merge nor the sources had.
func (m *Merge) logConflicts(prev, next Snapshot, sources ...Snapshot) {
	seen := map[string]bool{}
	for _, s := range append(sources, prev) {
		for _, e := range s.Errors {
			seen[e.Error()] = true
		}
	}
	for _, e := range next.Errors {
		if !seen[e.Error()] {
			m.log.Warn("applied pod not run: a static pod has its name", "pod", e.Namespace+"/"+e.Name, "err", e)
		}
	}
}

// mergeSnapshots is the desired set of both sources, sorted by
// namespace/name, with the errors of both. A name used by both is the
// static pod's: the manifest directory is the node administrator's and its
// pods are critical. The API pod is then reported as an error. The result's
// pods are copies the receiver owns.
func mergeSnapshots(static, api Snapshot, storeDir string) Snapshot {
	var out Snapshot
	taken := make(map[string]bool, len(static.Pods))
	for _, p := range static.Pods {
		taken[p.Namespace+"/"+p.Name] = true
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	out.Errors = append(out.Errors, static.Errors...)
	out.Errors = append(out.Errors, api.Errors...)
	for _, p := range api.Pods {
		if taken[p.Namespace+"/"+p.Name] {
			out.Errors = append(out.Errors, shadowedError(p, storeDir))
			continue
		}
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	slices.SortStableFunc(out.Pods, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// shadowedError reports an API pod whose name a static pod took after it
// was applied (apply refuses the name while the static pod exists).
func shadowedError(p *v1.Pod, storeDir string) ManifestError {
	dup := field.Duplicate(field.NewPath("metadata", "name"), p.Name)
	dup.Detail = fmt.Sprintf("a static pod %s/%s runs from the manifest directory; delete this pod or rename one of them", p.Namespace, p.Name)
	return ManifestError{
		Path:      filepath.Join(storeDir, storeFileName(p.Namespace, p.Name)),
		Namespace: p.Namespace,
		Name:      p.Name,
		Err:       FieldErrors{dup},
	}
}
