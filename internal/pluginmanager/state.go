package pluginmanager

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Back-off of a socket whose registration failed, as the kubelet's
// goroutinemap does it: 500ms after the first failure, doubling up to 2m2s.
const (
	initialRetryDelay = 500 * time.Millisecond
	maxRetryDelay     = 2*time.Minute + 2*time.Second
)

// stamp tells one socket file from another at the same path: a driver that
// restarts binds a new socket, with a new inode and modification time.
type stamp struct {
	ino   uint64
	mtime int64 // nanoseconds
}

// socket is a socket seen in the directory (the kubelet's desired state).
type socket struct {
	// gen numbers the socket files seen at this path: it changes when a
	// new file appears there, and a registration is of one gen.
	gen   uint64
	stamp stamp
}

// record is a registered plugin (the kubelet's actual state).
type record struct {
	gen    uint64
	plugin Plugin
}

// failure is the last failed registration of a socket.
type failure struct {
	gen     uint64
	count   int
	retryAt time.Time
	err     string
}

// actionKind is what the manager does to one socket.
type actionKind int

const (
	actRegister actionKind = iota
	actDeregister
)

// action is one operation to start. An operation on a path is never started
// while another on the same path is running.
type action struct {
	kind actionKind
	path string
	gen  uint64
	// plugin is the registered plugin to deregister.
	plugin Plugin
}

// result is how an operation ended.
type result struct {
	action
	// registered is the plugin, for a register that succeeded.
	registered Plugin
	err        error
}

// world is what the manager knows of the directory and of the handlers, as
// plain data: the sockets seen, the plugins registered, the operations
// running, the failures waiting for their retry. Only the manager's loop
// touches it; it does no I/O.
type world struct {
	lastGen    uint64
	sockets    map[string]socket
	registered map[string]record
	busy       map[string]bool
	failed     map[string]failure
}

func newWorld() *world {
	return &world{
		sockets:    map[string]socket{},
		registered: map[string]record{},
		busy:       map[string]bool{},
		failed:     map[string]failure{},
	}
}

// seen records a socket file at path. The same file seen twice (by the
// initial listing and by an event, or by a rescan) is one generation.
func (w *world) seen(path string, st stamp) {
	if s, ok := w.sockets[path]; ok && s.stamp == st {
		return
	}
	w.lastGen++
	w.sockets[path] = socket{gen: w.lastGen, stamp: st}
}

// gone records that no socket is at path any more.
func (w *world) gone(path string) {
	delete(w.sockets, path)
	if !w.busy[path] {
		delete(w.failed, path)
	}
}

// apply records what the directory reported.
func (w *world) apply(ev dirEvent) {
	switch {
	case ev.listing != nil:
		w.relist(ev.listing)
	case ev.present:
		w.seen(ev.path, ev.stamp)
	default:
		w.gone(ev.path)
	}
}

// relist replaces what is known of the directory by a full listing.
func (w *world) relist(sockets map[string]stamp) {
	for path := range w.sockets {
		if _, ok := sockets[path]; !ok {
			w.gone(path)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(sockets)) {
		w.seen(path, sockets[path])
	}
}

// plan returns the operations to start now, in path order, and marks their
// paths busy. As in the kubelet's reconciler, a plugin whose socket vanished
// or was replaced is deregistered first, and the new socket is registered
// once that is done.
func (w *world) plan(now time.Time) []action {
	var acts []action
	for path, rec := range w.registered {
		if w.busy[path] {
			continue
		}
		if s, ok := w.sockets[path]; !ok || s.gen != rec.gen {
			acts = append(acts, action{kind: actDeregister, path: path, gen: rec.gen, plugin: rec.plugin})
		}
	}
	for path, s := range w.sockets {
		if w.busy[path] {
			continue
		}
		if _, ok := w.registered[path]; ok {
			continue
		}
		// berth differs from the kubelet here on purpose: the kubelet's
		// back-off is per path, so a driver restarted after a failure waits
		// for it; here a new socket file is tried at once.
		if f, ok := w.failed[path]; ok && f.gen == s.gen && now.Before(f.retryAt) {
			continue
		}
		acts = append(acts, action{kind: actRegister, path: path, gen: s.gen})
	}
	slices.SortFunc(acts, func(a, b action) int { return strings.Compare(a.path, b.path) })
	for _, a := range acts {
		w.busy[a.path] = true
	}
	return acts
}

// done records how an operation ended.
func (w *world) done(r result, now time.Time) {
	delete(w.busy, r.path)
	switch {
	case r.kind == actDeregister:
		delete(w.registered, r.path)
	case r.err == nil:
		w.registered[r.path] = record{gen: r.gen, plugin: r.registered}
		delete(w.failed, r.path)
	default:
		count := 1
		if f, ok := w.failed[r.path]; ok && f.gen == r.gen {
			count = f.count + 1
		}
		w.failed[r.path] = failure{gen: r.gen, count: count, retryAt: now.Add(retryDelay(count)), err: r.err.Error()}
	}
	if _, ok := w.sockets[r.path]; !ok && !w.busy[r.path] {
		delete(w.failed, r.path)
	}
}

// retryDelay is the back-off after count failures in a row.
func retryDelay(count int) time.Duration {
	d := initialRetryDelay
	for i := 1; i < count && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// nextRetry returns when the earliest failure waiting for its back-off is
// due; false when none is waiting.
func (w *world) nextRetry() (time.Time, bool) {
	var next time.Time
	found := false
	for path, f := range w.failed {
		s, ok := w.sockets[path]
		if !ok || s.gen != f.gen || w.busy[path] {
			continue
		}
		if _, ok := w.registered[path]; ok {
			continue
		}
		if !found || f.retryAt.Before(next) {
			next, found = f.retryAt, true
		}
	}
	return next, found
}

// status returns what is known of each socket, in path order.
func (w *world) status() []SocketStatus {
	paths := map[string]bool{}
	for p := range w.sockets {
		paths[p] = true
	}
	for p := range w.registered {
		paths[p] = true
	}
	var out []SocketStatus
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		st := SocketStatus{Path: p}
		_, st.Present = w.sockets[p]
		if rec, ok := w.registered[p]; ok {
			plugin := rec.plugin
			plugin.Versions = slices.Clone(plugin.Versions)
			st.Registered = &plugin
		}
		// The failures of a socket file since replaced are not this one's.
		if f, ok := w.failed[p]; ok && f.gen == w.sockets[p].gen {
			st.Failures, st.LastError = f.count, f.err
		}
		out = append(out, st)
	}
	return out
}
