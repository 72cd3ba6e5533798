package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The atomic writer's names inside a volume, as the kubelet's AtomicWriter
// (pkg/volume/util) makes them, so that programs that watch the kubelet's
// layout (for "..data" to change) work unchanged.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	maxFileNameLen = 255
	maxPathLen     = 4096
)

// FileProjection is one file of a volume written from API data.
type FileProjection struct {
	Data []byte
	Mode int32
	// FsUser, when set, owns the file (a service account token readable by
	// the pod's one non-root user only).
	FsUser *int64
}

// writeAtomic makes dir hold exactly payload (relative path → file), so
// that a container never sees a mix of old and new files:
//
//	dir/..2024_01_02_15_04_05.123456/   the files, in a new directory per change
//	dir/..data -> ..2024_...             swapped with one rename
//	dir/<top-level name> -> ..data/<name>
//
// Until the rename, readers see the old content; after it, the new one. A
// key no longer in payload disappears with the old directory. Nothing is
// written when the content is unchanged. setPerms, if not nil, runs on the
// new files before they become visible (fsGroup ownership).
func writeAtomic(dir string, payload map[string]FileProjection, setPerms func() error) error {
	clean := make(map[string]FileProjection, len(payload))
	for p, f := range payload {
		if err := validatePayloadPath(p); err != nil {
			return err
		}
		clean[filepath.Clean(p)] = f
	}
	dataDir := filepath.Join(dir, dataDirName)
	oldTs, err := os.Readlink(dataDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", dataDir, err)
	}
	var toRemove map[string]bool
	write := true
	if oldTs != "" {
		oldPath := filepath.Join(dir, oldTs)
		if toRemove, err = pathsToRemove(clean, oldPath); err != nil {
			return err
		}
		changed, err := payloadChanged(clean, oldPath)
		if err != nil {
			return err
		}
		write = changed || len(toRemove) > 0
	}
	current := oldTs
	if write {
		if current, err = swapInNewData(dir, clean, setPerms); err != nil {
			return err
		}
	}
	if err := createUserVisibleFiles(dir, clean); err != nil {
		return err
	}
	for p := range toRemove {
		// Nested paths went with the old data directory; only the
		// top-level symlinks live in dir itself.
		if strings.Contains(p, "/") {
			continue
		}
		if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return removeStaleDataDirs(dir, current)
}

// swapInNewData writes payload into a new timestamped directory and points
// ..data at it with a rename, the one atomic step. It returns the new
// directory's name.
func swapInNewData(dir string, payload map[string]FileProjection, setPerms func() error) (string, error) {
	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return "", err
	}
	tsName := filepath.Base(tsDir)
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return "", err
	}
	if err := writePayload(tsDir, payload); err != nil {
		return "", err
	}
	if setPerms != nil {
		if err := setPerms(); err != nil {
			return "", err
		}
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	// A berth that died between the symlink and the rename left one.
	if err := os.Remove(tmpLink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.Symlink(tsName, tmpLink); err != nil {
		return "", err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return "", err
	}
	return tsName, nil
}

func writePayload(tsDir string, payload map[string]FileProjection) error {
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		if err := mkdirAllPerm(tsDir, filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(f.Mode) & os.ModePerm
		if err := os.WriteFile(full, f.Data, mode); err != nil {
			return err
		}
		// Exactly the mode asked for, whatever the umask took away.
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
		if f.FsUser != nil {
			if err := os.Lchown(full, int(*f.FsUser), -1); err != nil {
				return err
			}
		}
	}
	return nil
}

// mkdirAllPerm creates base/rel and the directories between with perm,
// regardless of the umask.
func mkdirAllPerm(base, rel string, perm os.FileMode) error {
	if rel == "." || rel == "" {
		return nil
	}
	cur := base
	for _, elem := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, elem)
		if err := makeDirWithPerm(cur, perm); err != nil {
			return err
		}
	}
	return nil
}

// createUserVisibleFiles links each top-level name of payload into ..data,
// once; an existing link already points there.
func createUserVisibleFiles(dir string, payload map[string]FileProjection) error {
	for p, f := range payload {
		top, _, _ := strings.Cut(p, "/")
		visible := filepath.Join(dir, top)
		if _, err := os.Lstat(visible); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Symlink(filepath.Join(dataDirName, top), visible); err != nil {
			return err
		}
		if f.FsUser != nil {
			if err := os.Lchown(visible, int(*f.FsUser), -1); err != nil {
				return err
			}
		}
	}
	return nil
}

// payloadChanged reports whether any file of payload is missing from the
// data directory oldDir or differs in content. Modes are not compared, as
// in the kubelet: they only change with the pod spec, which makes a new pod.
func payloadChanged(payload map[string]FileProjection, oldDir string) (bool, error) {
	for p, f := range payload {
		full := filepath.Join(oldDir, p)
		fi, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			// Missing, or under what was a file (a file became a
			// directory).
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if !fi.Mode().IsRegular() {
			// A directory where a file now goes (a key became a file).
			return true, nil
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(data, f.Data) {
			return true, nil
		}
	}
	return false, nil
}

// pathsToRemove lists the paths under oldDir (files and directories,
// relative) that the new payload no longer has, neither as a file nor as a
// directory on the way to one.
func pathsToRemove(payload map[string]FileProjection, oldDir string) (map[string]bool, error) {
	keep := map[string]bool{}
	for p := range payload {
		for sub := p; sub != "." && sub != "/"; sub = filepath.Dir(sub) {
			keep[sub] = true
		}
	}
	remove := map[string]bool{}
	err := filepath.WalkDir(oldDir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(oldDir, path)
		if err != nil || rel == "." {
			return err
		}
		if !keep[rel] {
			remove[rel] = true
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return remove, err
}

// removeStaleDataDirs removes the timestamped directories other than
// current: the one just replaced, and any a crash left behind. Every
// "..name" in a volume is the writer's: payload paths may not start so.
func removeStaleDataDirs(dir, current string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "..") || name == current {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("removing old data directory %s: %w", name, err)
		}
	}
	return nil
}

// validatePayloadPath is the kubelet's check on a volume file path:
// relative, no "..", no element over 255 bytes, and not starting with ".."
// (the writer's own names do).
func validatePayloadPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("invalid path: must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path %q: must be relative", p)
	case len(p) > maxPathLen:
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLen)
	}
	elems := strings.Split(p, "/")
	for _, e := range elems {
		if e == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
		if len(e) > maxFileNameLen {
			return fmt.Errorf("invalid path %q: file names must be at most %d characters", p, maxFileNameLen)
		}
	}
	if strings.HasPrefix(elems[0], "..") {
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	return nil
}
