// Package quarantine sets aside a state file that berth cannot trust: it is
// renamed, never deleted, so that a person can look at the evidence, and
// the next write starts afresh. Every store of berth's root dir (the probe
// results, the records of evicted pods, the applied pods, the device
// checkpoint) moves its bad files aside through Move, so that they all
// read alike: <file>.corrupt-<UTC time>.
//
// "Bad" includes a wrong file type: a directory, a fifo or a symlink where
// a file belongs. ReadFile reads a state file without being fooled by one
// (a fifo would block a plain read for ever).
package quarantine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// Infix separates the original name from the time it was set aside.
	Infix = ".corrupt-"
	// stampLayout is sortable, UTC, without spaces or colons.
	stampLayout = "20060102T150405.000000000Z"
	// maxTries bounds the search for a free name: a thousand files set
	// aside in one nanosecond are not a clock but an attack or a bug.
	maxTries = 1000
)

// Name is where the file at path goes when it is set aside at now; try
// counts the names already taken (0 first), so that two files set aside at
// the same instant (a clock that did not move) never replace each other.
func Name(path string, now time.Time, try int) string {
	name := path + Infix + now.UTC().Format(stampLayout)
	if try > 0 {
		name += "-" + strconv.Itoa(try)
	}
	return name
}

// Parse recognises a name Name made: it returns the original base name and
// when it was set aside. ok is false for any other name.
func Parse(base string) (orig string, at time.Time, ok bool) {
	i := strings.LastIndex(base, Infix)
	if i <= 0 {
		return "", time.Time{}, false
	}
	stamp := base[i+len(Infix):]
	if len(stamp) > len(stampLayout) {
		n, found := strings.CutPrefix(stamp[len(stampLayout):], "-")
		if v, err := strconv.Atoi(n); !found || err != nil || v <= 0 || strconv.Itoa(v) != n {
			return "", time.Time{}, false
		}
		stamp = stamp[:len(stampLayout)]
	}
	at, err := time.Parse(stampLayout, stamp)
	if err != nil {
		return "", time.Time{}, false
	}
	return base[:i], at, true
}

// Move renames path, whatever it is (a file, a directory with its
// contents, a fifo; a symlink is moved itself, not followed), to the first
// free Name for now, makes the rename durable and returns the new path.
func Move(path string, now time.Time) (string, error) {
	for try := range maxTries {
		to := Name(path, now, try)
		err := renameNoReplace(path, to)
		if err == nil {
			if err := syncDir(filepath.Dir(path)); err != nil {
				return to, fmt.Errorf("set aside %s as %s: %w", path, to, err)
			}
			return to, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("set aside %s: %w", path, err)
		}
	}
	return "", fmt.Errorf("set aside %s: %d names for %s already taken", path, maxTries, now.UTC().Format(stampLayout))
}

// renameNoReplace renames from to to unless to exists (fs.ErrExist). Where
// the file system cannot refuse atomically, it looks first: berth is the
// only writer of its root dir, so nothing can take the name in between.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		if err != nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
		}
		return nil
	}
	return renameLookFirst(from, to)
}

func renameLookFirst(from, to string) error {
	switch _, err := os.Lstat(to); {
	case err == nil:
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: fs.ErrExist}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return os.Rename(from, to)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ErrNotRegular is wrapped by ReadFile's error for a path that is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError names what stands where a state file belongs.
type NotRegularError struct {
	Path string
	Type fs.FileMode // the type bits of the file found
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: is a %s, %v", e.Path, TypeName(e.Type), ErrNotRegular)
}

func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// TypeName says in words what kind of file mode's type bits describe.
func TypeName(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t == 0:
		return "regular file"
	case t&fs.ModeDir != 0:
		return "directory"
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	default:
		return "file of type " + t.String()
	}
}

// ReadFile reads the regular file at path. A missing file gives an error
// that is fs.ErrNotExist; anything else in its place (a symlink, even to a
// file: berth writes its state by rename and never makes one) gives a
// *NotRegularError, at once: the file is opened without following links
// and without blocking, and checked once open.
func ReadFile(path string) ([]byte, error) {
	if st, err := os.Lstat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Type: st.Mode().Type()}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have been replaced since Lstat.
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Type: st.Mode().Type()}
	}
	return io.ReadAll(f)
}

// MkdirAll makes sure dir is a directory, as os.MkdirAll does, with one
// difference: anything else in its place (a file, a fifo, a dangling
// symlink) is moved aside first, at now, and where it went is returned ("" if
// nothing was moved). A symlink to a directory is a directory: an operator
// may have put the state elsewhere.
func MkdirAll(dir string, perm fs.FileMode, now time.Time) (string, error) {
	st, err := os.Stat(dir)
	if err == nil && st.IsDir() {
		return "", nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("state directory %s: %w", dir, err)
	}
	var moved string
	if _, lerr := os.Lstat(dir); lerr == nil {
		if moved, err = Move(dir, now); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return moved, fmt.Errorf("state directory %s: %w", dir, err)
	}
	return moved, nil
}
