package podsource

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"
)

const (
	// debounce is how long a burst of file events may settle before the
	// rescan: copying twenty manifests in costs a few scans, not twenty, and
	// a new pod waits no longer than its runtime would notice (a pod costs
	// the runtime 130 ms and more).
	debounce = 20 * time.Millisecond
	// DefaultResync is the kubelet's default file check frequency.
	DefaultResync = 20 * time.Second
)

// Dir watches a manifest directory and reports the pods it asks for.
// Inotify makes changes visible within the debounce period; a full rescan
// every resync period catches what inotify cannot see, such as a file that
// a symlink in the directory points to.
type Dir struct {
	dir      string
	nodeName string
	resync   time.Duration
	clk      clock.Clock
	log      *slog.Logger
	// armed, if set, is called each time a rescan is scheduled after file
	// events; tests step their fake clock on it.
	armed func()
}

// NewDir returns a watcher for dir. A resync period that is not positive
// means DefaultResync; a nil logger discards.
func NewDir(dir, nodeName string, resync time.Duration, clk clock.Clock, log *slog.Logger) *Dir {
	if resync <= 0 {
		resync = DefaultResync
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir = filepath.Clean(dir)
	return &Dir{dir: dir, nodeName: nodeName, resync: resync, clk: clk, log: log.With("dir", dir)}
}

// Run sends a Snapshot on out at start and then whenever the result
// changes. Only the newest undelivered snapshot is kept, so a slow reader
// never sees a stale one. Run returns nil when ctx is done; it fails on
// nothing else, since a watch it cannot set up degrades to rescans. It does
// not close out.
func (d *Dir) Run(ctx context.Context, out chan<- Snapshot) error {
	w := newWatch(d.dir, d.log)
	defer w.close()
	resync := d.clk.NewTimer(d.resync)
	defer resync.Stop()

	var (
		last      Snapshot
		scanned   bool // last holds a scan
		pending   bool // last has not been delivered
		debounceT clock.Timer
		debounceC <-chan time.Time
	)
	scan := func() {
		w.reconcile()
		s := ReadDir(d.dir, d.nodeName)
		resync.Reset(d.resync)
		if scanned && s.Equal(last) {
			return
		}
		d.logChange(last, s)
		last, scanned, pending = s, true, true
	}
	arm := func() {
		if debounceC != nil {
			return
		}
		debounceT = d.clk.NewTimer(debounce)
		debounceC = debounceT.C()
		if d.armed != nil {
			d.armed()
		}
	}
	scan()
	for {
		var send chan<- Snapshot
		if pending {
			send = out
		}
		select {
		case <-ctx.Done():
			if debounceT != nil {
				debounceT.Stop()
			}
			return nil
		case send <- last:
			pending = false
		case ev := <-w.events():
			if w.relevant(ev) {
				d.log.Debug("manifest event", "event", ev.String())
				arm()
			}
		case err := <-w.errors():
			d.log.Warn("watching manifests", "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				arm() // events were lost: look again
			}
		case <-debounceC:
			debounceC = nil
			scan()
		case <-resync.C():
			scan()
		}
	}
}

// logChange logs a new snapshot, and each error it did not have before, so
// a broken manifest is reported once rather than at every rescan.
func (d *Dir) logChange(prev, next Snapshot) {
	d.log.Info("manifests read", "pods", len(next.Pods), "errors", len(next.Errors))
	seen := make(map[string]bool, len(prev.Errors))
	for _, e := range prev.Errors {
		seen[e.Error()] = true
	}
	for _, e := range next.Errors {
		if !seen[e.Error()] {
			d.log.Warn("invalid manifest", "path", e.Path, "pod", e.Namespace+"/"+e.Name, "err", e.Err)
		}
	}
}
