package stats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Bounds of a directory walk. A pod controls what is in its volumes and
// logs, so the walk must stay cheap and safe whatever it finds there.
const (
	// maxWalkDepth caps nesting: the walk holds one descriptor per level.
	maxWalkDepth = 256
	// readBatch is how many names are read from a directory at a time, so
	// a directory of a million entries never sits in memory at once.
	readBatch = 1024
	// ctxCheckEvery is how often, in entries, the walk looks at its context.
	ctxCheckEvery = 256
)

// diskUsage is what a tree holds on disk, counted as du and the kubelet's
// volume metrics count it: allocated blocks, not apparent sizes.
type diskUsage struct {
	Bytes  uint64 // st_blocks × 512
	Inodes uint64
	// Skipped counts the entries that could not be read, or lay deeper
	// than maxWalkDepth: their own inode may be counted, their content not.
	Skipped uint64
}

// walker accumulates one walk.
type walker struct {
	ctx     context.Context
	dev     uint64
	seen    map[uint64]struct{} // inodes with more than one link, counted once
	u       diskUsage
	entries int
}

// walkDir measures the tree at dir. It never follows a symlink (every open
// is relative to the parent's descriptor, with O_NOFOLLOW, so a directory
// swapped for a symlink mid-walk is refused, not followed), never crosses
// into another filesystem (a mount point is another volume's usage), counts
// each hard-linked inode once, and skips what it cannot read. It fails only
// when dir itself cannot be opened, or when ctx ends.
func walkDir(ctx context.Context, dir string) (diskUsage, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return diskUsage{}, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return diskUsage{}, &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
	w := &walker{ctx: ctx, dev: st.Dev, seen: map[uint64]struct{}{}}
	w.count(&st)
	if err := w.dir(fd, dir, 0, true); err != nil {
		return w.u, err
	}
	return w.u, nil
}

// filesUsage measures the files directly in dir, not dir itself nor its
// subdirectories: the kubelet's pod-level log files.
func filesUsage(ctx context.Context, dir string) (diskUsage, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return diskUsage{}, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return diskUsage{}, &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
	w := &walker{ctx: ctx, dev: st.Dev, seen: map[uint64]struct{}{}}
	if err := w.dir(fd, dir, 0, false); err != nil {
		return w.u, err
	}
	return w.u, nil
}

// fileUsage measures one file, not following a symlink.
func fileUsage(path string) (diskUsage, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return diskUsage{}, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	return diskUsage{Bytes: uint64(st.Blocks) * 512, Inodes: 1}, nil
}

func (w *walker) count(st *unix.Stat_t) {
	w.u.Bytes += uint64(st.Blocks) * 512
	w.u.Inodes++
}

// dir reads the directory open at fd (and closes it), counting its entries
// and, if descend, walking its subdirectories.
func (w *walker) dir(fd int, path string, depth int, descend bool) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	for {
		names, err := f.Readdirnames(readBatch)
		for _, name := range names {
			if err := w.entry(fd, path, name, depth, descend); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// The rest of the directory is unreadable: a skip, not a
			// failure of the walk.
			w.u.Skipped++
			return nil
		}
	}
}

func (w *walker) entry(dirfd int, dirPath, name string, depth int, descend bool) error {
	if w.entries++; w.entries%ctxCheckEvery == 0 {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("walk %s: %w", dirPath, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		// An entry removed since it was listed holds nothing to count.
		if !errors.Is(err, unix.ENOENT) {
			w.u.Skipped++
		}
		return nil
	}
	if st.Dev != w.dev {
		return nil
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if isDir && !descend {
		return nil
	}
	if !isDir && st.Nlink > 1 {
		if _, ok := w.seen[st.Ino]; ok {
			return nil
		}
		w.seen[st.Ino] = struct{}{}
	}
	w.count(&st)
	if !isDir {
		return nil
	}
	if depth+1 > maxWalkDepth {
		w.u.Skipped++
		return nil
	}
	cfd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			w.u.Skipped++
		}
		return nil
	}
	// The name may have been replaced by another directory since the stat:
	// descend only if what was opened is still on this filesystem.
	var cst unix.Stat_t
	if err := unix.Fstat(cfd, &cst); err != nil || cst.Dev != w.dev {
		unix.Close(cfd)
		return nil
	}
	return w.dir(cfd, dirPath+"/"+name, depth+1, true)
}
