package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// dirEvent is what the directory reports: either a full listing of its
// sockets, or that one path now holds a socket (present) or none.
type dirEvent struct {
	listing map[string]stamp
	path    string
	present bool
	stamp   stamp
}

// source is the file-system edge: it sends a full listing of the
// directory's sockets, then every change, until ctx ends.
type source interface {
	run(ctx context.Context, out chan<- dirEvent)
}

// fsWatch watches one directory with inotify. Like the kubelet it ignores
// names starting with "." (berth's own sockets are bound under such a
// temporary name and renamed), and anything that is not a unix socket
// (unlike the kubelet, a symlink to one too: its target's changes are not
// seen here).
// Unlike the kubelet it does not descend into subdirectories: drivers put
// their registration sockets in the directory itself.
type fsWatch struct {
	dir string
	log *slog.Logger
	w   *fsnotify.Watcher
}

// openDir starts watching dir. The listing sent by run is taken after the
// watch is in place, so no socket created in between goes unseen.
func openDir(dir string, log *slog.Logger) (source, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching plugin registration directory %s: %w", dir, err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching plugin registration directory %s: %w", dir, err)
	}
	return &fsWatch{dir: dir, log: log, w: w}, nil
}

func (f *fsWatch) run(ctx context.Context, out chan<- dirEvent) {
	defer f.w.Close()
	send := func(ev dirEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !send(dirEvent{listing: f.list()}) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-f.w.Events:
			if !ok {
				return
			}
			var de dirEvent
			switch {
			case ev.Name == f.dir:
				// The directory itself was removed or moved: what it held is
				// gone, and a listing says so.
				f.log.Warn("plugin registration directory changed under the watch", "dir", f.dir, "op", ev.Op.String())
				de = dirEvent{listing: f.list()}
			case filepath.Dir(ev.Name) != f.dir || ignored(ev.Name):
				continue
			default:
				// Whatever the event, the path's state now is what counts:
				// events may come late or merged, a fresh look cannot.
				de = f.look(ev.Name)
			}
			if !send(de) {
				return
			}
		case err, ok := <-f.w.Errors:
			if !ok {
				return
			}
			f.log.Warn("watching plugin registration directory", "dir", f.dir, "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) && !send(dirEvent{listing: f.list()}) {
				return
			}
		}
	}
}

func ignored(path string) bool {
	return strings.HasPrefix(filepath.Base(path), ".")
}

// look reports whether a socket is at path now.
func (f *fsWatch) look(path string) dirEvent {
	fi, err := os.Lstat(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("cannot stat plugin socket", "path", path, "err", err)
		}
		return dirEvent{path: path}
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return dirEvent{path: path}
	}
	return dirEvent{path: path, present: true, stamp: stampOf(fi)}
}

// list returns the sockets in the directory; none if it cannot be read.
func (f *fsWatch) list() map[string]stamp {
	out := map[string]stamp{}
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		f.log.Warn("cannot list plugin registration directory", "dir", f.dir, "err", err)
		return out
	}
	for _, e := range entries {
		path := filepath.Join(f.dir, e.Name())
		if ignored(path) || e.Type() != fs.ModeSocket {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed since ReadDir; its event follows
		}
		out[path] = stampOf(fi)
	}
	return out
}

func stampOf(fi fs.FileInfo) stamp {
	st := stamp{mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}
