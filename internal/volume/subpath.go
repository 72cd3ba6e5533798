package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// PrepareSubPath makes sure a volumeMount's subPath (see
// kuberuntime.SubPaths) exists inside its volume before the container that
// mounts it is created, as the kubelet's makeMounts does: missing directories
// are created with the volume's own permissions (a runtime would create them
// with its defaults), and a subPath that resolves, through symlinks a
// container may have planted in the volume, to anywhere outside the volume is
// refused.
//
// The check and the runtime's bind mount are two steps, so a container that
// swaps a checked directory for a symlink in between can still win the race;
// the kubelet closes that window by bind-mounting an already opened file
// descriptor, which berth does not do yet.
func (m *Manager) PrepareSubPath(volumePath, subPath string) error {
	if filepath.IsAbs(subPath) {
		return fmt.Errorf("subPath %q must not be an absolute path", subPath)
	}
	clean := filepath.Clean(subPath)
	for _, elem := range strings.Split(clean, "/") {
		if elem == ".." {
			return fmt.Errorf("subPath %q must not contain '..'", subPath)
		}
	}
	base, err := filepath.EvalSymlinks(volumePath)
	if err != nil {
		return fmt.Errorf("subPath %q: resolving volume path: %w", subPath, err)
	}
	fi, err := os.Stat(base)
	if err != nil {
		return fmt.Errorf("subPath %q: %w", subPath, err)
	}
	// New directories get the volume root's mode, special bits included,
	// as the kubelet's SafeMakeDir(subPath, volumePath, GetMode(volumePath)).
	perm := fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	cur := base
	if clean == "." {
		return nil
	}
	for _, elem := range strings.Split(clean, "/") {
		next := filepath.Join(cur, elem)
		if _, err := os.Lstat(next); errors.Is(err, fs.ErrNotExist) {
			if err := makeDirNoFollow(next, perm); err != nil {
				return fmt.Errorf("subPath %q: creating %s: %w", subPath, next, err)
			}
			m.log.Debug("created subPath directory", "path", next)
		} else if err != nil {
			return fmt.Errorf("subPath %q: %w", subPath, err)
		}
		resolved, err := filepath.EvalSymlinks(next)
		if err != nil {
			return fmt.Errorf("subPath %q: %w", subPath, err)
		}
		if !within(base, resolved) {
			return fmt.Errorf("subPath %q resolves to %s, outside the volume", subPath, resolved)
		}
		cur = resolved
	}
	return nil
}

// makeDirNoFollow creates dir with exactly perm (permission bits and the
// setuid, setgid and sticky bits). The mode is set through a descriptor
// opened without following symlinks, so a symlink swapped in after the
// mkdir cannot redirect the chmod to a file outside the volume.
func makeDirNoFollow(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm.Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
	// A setgid bit the directory inherited from a setgid volume (fsGroup)
	// stays even when perm lacks it.
	if want := st.Mode&unix.S_ISGID | kernelMode(perm); st.Mode&0o7777 != want {
		if err := unix.Fchmod(fd, want); err != nil {
			return &os.PathError{Op: "fchmod", Path: dir, Err: err}
		}
	}
	return nil
}

// kernelMode turns a Go file mode into the bits chmod(2) takes.
func kernelMode(m os.FileMode) uint32 {
	out := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		out |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		out |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		out |= unix.S_ISVTX
	}
	return out
}

func within(base, p string) bool {
	if base == "/" {
		return true
	}
	return p == base || strings.HasPrefix(p, base+"/")
}
