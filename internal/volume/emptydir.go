package volume

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// emptyDirPerm is the mode of an emptyDir, as the kubelet makes it: any user
// of any container may write there.
const emptyDirPerm os.FileMode = 0o777

func (m *Manager) setupEmptyDir(uid types.UID, name string, src *v1.EmptyDirVolumeSource) (string, error) {
	dir := filepath.Join(m.emptyDirRoot(uid), name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	if err := makeDirWithPerm(dir, emptyDirPerm); err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
		return dir, nil
	case v1.StorageMediumMemory:
		if err := m.setupTmpfs(uid, name, dir, src.SizeLimit); err != nil {
			return "", fmt.Errorf("emptyDir: %w", err)
		}
		return dir, nil
	}
	return "", fmt.Errorf("emptyDir: medium %q is not supported", src.Medium)
}

// setupTmpfs mounts a tmpfs on dir unless one is already there; sizeLimit,
// when set, caps it. Without one the tmpfs takes the kernel's default.
func (m *Manager) setupTmpfs(uid types.UID, name, dir string, sizeLimit *resource.Quantity) error {
	mounted, err := m.mounter.IsMountPoint(dir)
	if err != nil {
		return err
	}
	if mounted {
		return nil
	}
	var size int64
	if sizeLimit != nil {
		size = sizeLimit.Value()
	}
	if err := m.mounter.MountTmpfs(dir, size); err != nil {
		return err
	}
	m.log.Info("mounted tmpfs volume", "podUID", uid, "volume", name, "path", dir, "sizeBytes", size)
	return nil
}

// makeDirWithPerm creates dir if needed and gives it exactly perm: the
// process umask would otherwise take bits away.
func makeDirWithPerm(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil && !os.IsExist(err) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	if fi.Mode().Perm() != perm {
		if err := os.Chmod(dir, perm); err != nil {
			return err
		}
	}
	return nil
}
