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
	perm := fi.Mode().Perm()
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

// makeDirNoFollow creates dir with exactly perm. The mode is set through a
// descriptor opened without following symlinks, so a symlink swapped in after
// the mkdir cannot redirect the chmod to a file outside the volume.
func makeDirNoFollow(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
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
	// Only the permission bits: a setgid bit the directory inherited from a
	// setgid volume (fsGroup) must stay.
	if want := st.Mode&^0o777 | uint32(perm); st.Mode&0o7777 != want&0o7777 {
		if err := unix.Fchmod(fd, want&0o7777); err != nil {
			return &os.PathError{Op: "fchmod", Path: dir, Err: err}
		}
	}
	return nil
}

func within(base, p string) bool {
	if base == "/" {
		return true
	}
	return p == base || strings.HasPrefix(p, base+"/")
}
