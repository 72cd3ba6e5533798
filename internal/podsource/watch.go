package podsource

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// watch keeps one inotify watch on the manifest directory or, while that
// does not exist, on its nearest existing ancestor, so that creating the
// directory (or any directory on the way to it) is seen at once. Without
// inotify it degrades to nothing, and the periodic rescan carries on alone.
type watch struct {
	dir    string
	log    *slog.Logger
	w      *fsnotify.Watcher // nil while inotify is unavailable
	target string            // the watched path; "" when none
	warned bool              // a failure was logged; the next is logged only after a success
}

func newWatch(dir string, log *slog.Logger) *watch {
	return &watch{dir: dir, log: log}
}

func (w *watch) events() <-chan fsnotify.Event {
	if w.w == nil {
		return nil
	}
	return w.w.Events
}

func (w *watch) errors() <-chan error {
	if w.w == nil {
		return nil
	}
	return w.w.Errors
}

func (w *watch) close() {
	if w.w != nil {
		_ = w.w.Close() // nothing to do about a failure on the way out
	}
}

// reconcile points the watch where it should be now. Callers scan after it,
// so no change between the two goes unseen.
func (w *watch) reconcile() {
	if w.w == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			w.fail("cannot watch manifests; relying on periodic rescans", err)
			return
		}
		w.w = fw
	}
	// A directory on the way down may appear between finding the target and
	// watching it, unseen by the old watch: look again until it holds still.
	for range 16 {
		target := nearestDir(w.dir)
		// fsnotify drops a watch whose directory was removed or moved away.
		if target == w.target && slices.Contains(w.w.WatchList(), target) {
			return
		}
		if w.target != "" {
			_ = w.w.Remove(w.target) // it may be gone already, which is fine
			w.target = ""
		}
		if target == "" {
			return
		}
		if err := w.w.Add(target); err != nil {
			w.fail("cannot watch manifests; relying on periodic rescans", err, "path", target)
			return
		}
		w.target, w.warned = target, false
		w.log.Debug("watching for manifests", "path", target)
	}
}

func (w *watch) fail(msg string, err error, args ...any) {
	if !w.warned {
		w.log.Warn(msg, append([]any{"err", err}, args...)...)
		w.warned = true
	}
}

// relevant reports whether an event can change what a scan finds.
func (w *watch) relevant(ev fsnotify.Event) bool {
	if ev.Name == w.dir || ev.Name == w.target {
		return true
	}
	if w.target == w.dir {
		return !ignored(filepath.Base(ev.Name))
	}
	// Above the directory only the next step towards it matters.
	return strings.HasPrefix(w.dir, ev.Name+string(filepath.Separator))
}

// nearestDir is dir if it is a directory, else its nearest ancestor that is.
func nearestDir(dir string) string {
	for p := dir; ; {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return ""
		}
		p = parent
	}
}
