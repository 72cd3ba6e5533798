package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"
)

// pollInterval bounds how late a follower notices that the container has
// exited or that the file was rotated, neither of which writes to the file.
const pollInterval = 500 * time.Millisecond

// Options say what Copy writes.
type Options struct {
	// Follow keeps copying what is appended to the file, and to the new
	// file at its path once it is rotated, until Stop says the container
	// has exited or the context ends.
	Follow bool
	// Timestamps prefixes each line with the time the runtime recorded.
	Timestamps bool
	// TailLines is how many of the last lines to copy; negative means all.
	TailLines int
	// Since leaves out the lines the runtime recorded before it (zero: none
	// left out), counted after TailLines, as in the kubelet's ReadLogs.
	Since time.Time
	// LimitBytes stops the copy after that many bytes of output (0: no
	// limit); reaching it is not an error.
	LimitBytes int64
	// Stop is asked while following, once the file is read to its end and
	// then on every poll: true means the container has exited, so Copy
	// copies what is left and returns. Nil never stops.
	Stop func() bool
	// Clock drives the poll for Stop and for rotation; nil is the real clock.
	Clock clock.WithTicker
	// Log is told of each line that is not in the CRI format; nil
	// discards.
	Log *slog.Logger
}

// Copy writes the contents of the CRI log file at path to w: the content of
// each line without the CRI prefix, partial lines joined. A line that is not
// in the CRI format (the runtime cut it short on a full disk, say) is left
// out and logged, as the kubelet's ReadLogs does: it is no output of the
// container's, and a cut timestamp is no line to show. When following, a cancelled ctx
// ends the copy with ctx's error.
func Copy(ctx context.Context, w io.Writer, path string, opts Options) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()

	// Lines still wanted from the rotated file before this one; -1 for all.
	fromPrevious := -1
	if opts.TailLines >= 0 {
		offset, found, err := tailOffset(f, opts.TailLines)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		fromPrevious = opts.TailLines - found
	}

	if opts.LimitBytes > 0 {
		w = &limitedWriter{w: w, left: opts.LimitBytes}
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := bufio.NewWriterSize(w, 32<<10)
	newCopier := func(path string, r io.Reader) *copier {
		return &copier{
			path:       path,
			log:        log,
			in:         bufio.NewReaderSize(r, 64<<10),
			out:        out,
			timestamps: opts.Timestamps,
			since:      opts.Since,
			lineStart:  true,
		}
	}
	err = copyPrevious(path, fromPrevious, newCopier)
	if err == nil {
		c := newCopier(path, f)
		if !opts.Follow {
			err = c.drain()
		} else {
			err = c.follow(ctx, f, opts)
		}
	}
	if errors.Is(err, errLimitReached) {
		return nil // all that was asked for is written
	}
	return err
}

// copyPrevious copies the last n lines (all for -1; none for 0) of the
// newest rotated log of path that is not compressed yet, if there is one.
//
// berth differs from the kubelet on purpose here: the kubelet reads only the
// current file, so just after a rotation `kubectl logs` shows next to
// nothing. Reading the rotated file too (the one the rotator leaves
// uncompressed, as the kubelet's does) shows the container's latest lines
// whenever the file was rotated.
func copyPrevious(path string, n int, newCopier func(string, io.Reader) *copier) error {
	if n == 0 {
		return nil
	}
	prev := previousLog(path)
	if prev == "" {
		return nil
	}
	f, err := os.Open(prev)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // compressed or removed since it was listed
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", prev, err)
	}
	defer f.Close()
	if n > 0 {
		offset, _, err := tailOffset(f, n)
		if err != nil {
			return fmt.Errorf("reading %s: %w", prev, err)
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return fmt.Errorf("reading %s: %w", prev, err)
		}
	}
	return newCopier(prev, f).drain()
}

// previousLog returns the newest file rotated from path that is not
// compressed yet ("" for none): <path>.<timestamp>, named as the rotator
// names them.
func previousLog(path string) string {
	dir, base := splitPath(path)
	names, err := readDirNames(dirOf(path))
	if err != nil {
		return ""
	}
	newest := ""
	for _, name := range names {
		stamp, ok := strings.CutPrefix(name, base+".")
		if !ok || len(stamp) != len(rotatedTimeFormat) {
			continue
		}
		if _, err := time.Parse(rotatedTimeFormat, stamp); err == nil && name > newest {
			newest = name
		}
	}
	if newest == "" {
		return ""
	}
	return dir + newest
}

// maxLoggedLine is how much of a malformed line the log shows.
const maxLoggedLine = 200

// errLimitReached ends a copy that wrote LimitBytes.
var errLimitReached = errors.New("log byte limit reached")

// limitedWriter writes at most left bytes, then fails with
// errLimitReached: the kubelet's LimitedWriter.
type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	var err error
	if int64(len(p)) > l.left {
		p, err = p[:l.left], errLimitReached
	}
	n, werr := l.w.Write(p)
	l.left -= int64(n)
	if werr != nil {
		return n, werr
	}
	return n, err
}

// follow copies until the container exits or ctx ends. File events wake it
// as soon as something is written. The ticker covers what writes nothing
// (the container exiting) and inotify being unavailable; Stop is asked only
// then, so that a chatty container does not cost a runtime call per write.
//
// A rotation renames the file away and the runtime opens a new one at the
// same path: as the kubelet's ReadLogs does, the directory is watched, the
// old file is read to its end and the copy goes on in the new one. A file
// removed and not created again is followed until the container exits.
func (c *copier) follow(ctx context.Context, f *os.File, opts Options) error {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ticker := clk.NewTicker(pollInterval)
	defer ticker.Stop()
	events, watchErrs, unwatch := watchDir(filepath.Dir(c.path))
	defer unwatch()
	stopped := func() bool { return opts.Stop != nil && opts.Stop() }
	watched := filepath.Clean(c.path) // as the events name it
	fl := &following{c: c, first: f, current: f}
	defer fl.close()

	if err := c.copyAvailable(); err != nil {
		return err
	}
	if stopped() {
		// Following a container that has already exited.
		return c.drain()
	}
	for {
		// Whether the path may name a new file: a cheap event says so, or
		// the tick, when inotify is unavailable.
		moved := false
		select {
		case <-ctx.Done():
			if err := c.out.Flush(); err != nil {
				return err
			}
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Name != watched {
				continue // another container's log, or a rotated file
			}
			moved = ev.Has(fsnotify.Create)
		case _, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
			}
			// A watch error (an overflowed queue) loses nothing: the file
			// is read again below and on every tick.
		case <-ticker.C():
			moved = true
			// Once the container is gone, the file is complete: whatever it
			// wrote before exiting is copied (from a new file too, if it was
			// rotated just before), then the copy ends.
			if stopped() {
				if err := fl.switchTo(); err != nil {
					return err
				}
				return c.drain()
			}
		}
		if err := c.copyAvailable(); err != nil {
			return err
		}
		if moved {
			if err := fl.switchTo(); err != nil {
				return err
			}
		}
	}
}

// watchDir watches dir for the log's rotations; the channels are nil where
// inotify is unavailable, and the ticker alone then notices.
func watchDir(dir string) (<-chan fsnotify.Event, <-chan error, func()) {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, func() {}
	}
	if watcher.Add(dir) != nil {
		watcher.Close()
		return nil, nil, func() {}
	}
	return watcher.Events, watcher.Errors, func() { watcher.Close() }
}

// following is the file a follow copies from: the one it opened first, or
// the one the runtime opened at the path after a rotation.
type following struct {
	c       *copier
	first   *os.File
	current *os.File
}

// switchTo goes on in the file now at the path if it is a new one.
func (fl *following) switchTo() error {
	next, err := fl.c.reopened(fl.current)
	if next != nil {
		fl.close()
		fl.current = next
	}
	return err
}

// close closes the current file unless it is the first, which the caller
// owns.
func (fl *following) close() {
	if fl.current != fl.first {
		fl.current.Close()
	}
}

// reopened returns the file now at c.path when it is not open (the log was
// rotated and the runtime opened a new one), having copied the rest of the
// open one; nil when there is none yet.
func (c *copier) reopened(open *os.File) (*os.File, error) {
	if sameFile(open, c.path) {
		return nil, nil
	}
	next, err := os.Open(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // renamed away, not reopened yet; or removed
	}
	if err != nil {
		return nil, fmt.Errorf("reopening %s after a rotation: %w", c.path, err)
	}
	// What the runtime wrote to the old file before switching is all
	// there is of it; a line it left unfinished is not continued.
	if err := c.drain(); err != nil {
		next.Close()
		return nil, err
	}
	c.in.Reset(next)
	c.lineStart = true
	return next, nil
}

// sameFile reports whether path still names the open file.
func sameFile(f *os.File, path string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	if err != nil {
		return false
	}
	return os.SameFile(open, now)
}

// copier turns raw CRI lines into output. It keeps the state that spans
// reads: an unfinished raw line, and whether the output is at the start of a
// logical line (where a timestamp goes).
type copier struct {
	path       string
	log        *slog.Logger
	in         *bufio.Reader
	out        *bufio.Writer
	timestamps bool
	since      time.Time
	lineStart  bool
	// pending holds a raw line read up to the end of the file but not yet
	// ended by a newline: the runtime may still be writing it.
	pending []byte
}

// copyAvailable copies every complete raw line now in the file, then flushes
// so a follower's reader sees it at once.
func (c *copier) copyAvailable() error {
	for {
		chunk, err := c.in.ReadSlice('\n')
		switch {
		case err == nil:
			line := chunk[:len(chunk)-1]
			if len(c.pending) > 0 {
				line = append(c.pending, line...)
				c.pending = c.pending[:0]
			}
			if err := c.writeLine(line); err != nil {
				return err
			}
		case errors.Is(err, bufio.ErrBufferFull):
			c.pending = append(c.pending, chunk...)
		case errors.Is(err, io.EOF):
			c.pending = append(c.pending, chunk...)
			return c.out.Flush()
		default:
			return fmt.Errorf("reading %s: %w", c.path, err)
		}
	}
}

// drain copies what is left, including an unfinished last line, and ends.
func (c *copier) drain() error {
	if err := c.copyAvailable(); err != nil {
		return err
	}
	return c.finish()
}

// finish writes an unfinished last line, which no writer will complete now,
// and flushes.
func (c *copier) finish() error {
	if len(c.pending) > 0 {
		line := c.pending
		c.pending = nil
		if err := c.writeLine(line); err != nil {
			return err
		}
	}
	return c.out.Flush()
}

// writeLine writes one raw line of the file (without its newline). Write
// errors are sticky in a bufio.Writer, so checking the last write (or the
// next Flush) catches them all.
func (c *copier) writeLine(line []byte) error {
	e, ok := parseLine(line)
	if ok && !c.since.IsZero() && e.time.Before(c.since) {
		return nil // the kubelet filters each entry by its own time
	}
	if !ok {
		c.log.Warn("skipping a line of a container log that is not in the CRI format",
			"path", c.path, "line", string(line[:min(len(line), maxLoggedLine)]))
		return nil
	}
	if c.timestamps && c.lineStart {
		c.out.Write(e.timestamp)
		c.out.WriteByte(' ')
	}
	_, err := c.out.Write(e.content)
	c.lineStart = !e.partial
	if e.partial {
		return err
	}
	return c.out.WriteByte('\n')
}

// tailOffset returns the offset in r at which its last n logical lines begin
// (a logical line being a run of partial entries and the full entry that
// ends it). A logical line still being written at the end is included, so a
// follower sees it whole.
func tailOffset(r io.Reader, n int) (offset int64, found int, err error) {
	// starts is a ring of the offsets of the last n complete logical lines,
	// grown as lines are found so that a huge n costs nothing up front.
	starts := make([]int64, 0, min(n, 1024))
	var count int
	var current int64
	br := bufio.NewReaderSize(r, 64<<10)
	// Only the start of a raw line is needed to tell whether it ends a
	// logical line; the rest is skipped without being kept.
	const prefixLen = 128
	prefix := make([]byte, 0, prefixLen)
	for {
		chunk, err := br.ReadSlice('\n')
		offset += int64(len(chunk))
		if room := prefixLen - len(prefix); room > 0 {
			prefix = append(prefix, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == nil:
			if endsLine(bytes.TrimSuffix(prefix, []byte{'\n'})) {
				switch {
				case len(starts) < n:
					starts = append(starts, current)
				case n > 0:
					starts[count%n] = current
				}
				count++
				current = offset
			}
			prefix = prefix[:0]
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			switch {
			case n == 0:
				return current, 0, nil
			case count < n:
				return 0, count, nil
			default:
				return starts[count%n], n, nil
			}
		default:
			return 0, 0, err
		}
	}
}
