package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/v1helper"
)

// emptyDirPerm is the mode of an emptyDir, as the kubelet makes it: any user
// of any container may write there.
const emptyDirPerm os.FileMode = 0o777

// setupEmptyDir makes the pod's emptyDir volume name, on a tmpfs for the
// Memory medium and a hugetlbfs for the HugePages ones, as the kubelet's emptyDir SetUpAt does. A volume set up for
// the first time (no ready marker, or its directory or tmpfs gone) is then
// given to the pod's fsGroup; one already set up is left alone, so that the
// group of files the pod wrote since is kept across container restarts.
func (m *Manager) setupEmptyDir(pod *v1.Pod, name string, src *v1.EmptyDirVolumeSource) (string, error) {
	dir := filepath.Join(m.emptyDirRoot(pod.UID), name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	_, statErr := os.Lstat(dir)
	fresh := errors.Is(statErr, fs.ErrNotExist) || !m.emptyDirReady(pod.UID, name)
	if err := makeDirWithPerm(dir, emptyDirPerm); err != nil {
		return "", fmt.Errorf("emptyDir: %w", err)
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		mounted, err := m.setupTmpfs(pod.UID, name, dir, src.SizeLimit)
		if err != nil {
			return "", fmt.Errorf("emptyDir: %w", err)
		}
		fresh = fresh || mounted
	default:
		if !v1helper.IsHugePageMedium(src.Medium) {
			return "", fmt.Errorf("emptyDir: medium %q is not supported", src.Medium)
		}
		mounted, err := m.setupHugetlbfs(pod, name, dir, src.Medium)
		if err != nil {
			return "", fmt.Errorf("emptyDir: %w", err)
		}
		fresh = fresh || mounted
	}
	if fresh {
		m.emptyDirOwnership(pod, name, dir)
		m.markEmptyDirReady(pod.UID, name)
	}
	return dir, nil
}

// emptyDirOwnership gives a new emptyDir to the pod's fsGroup, read-write
// (the kubelet's emptyDir is never read-only): group rw on files, and rwx
// plus setgid on directories so that what the containers create belongs
// to the group too. Like the kubelet, which passes no fsGroupChangePolicy
// for emptyDir and discards the outcome of ChangePermissions, a failure is
// logged and the volume used as it is.
func (m *Manager) emptyDirOwnership(pod *v1.Pod, name, dir string) {
	gid := podFSGroup(pod)
	if gid == nil {
		return
	}
	if err := setVolumeOwnership(dir, *gid, false); err != nil {
		m.log.Warn("emptyDir: setting fsGroup ownership failed", "podUID", pod.UID, "volume", name, "fsGroup", *gid, "err", err)
	}
}

// emptyDirReadyFile is where the kubelet marks an emptyDir set up
// (volumeutil.SetReady on the volume's plugin directory):
// <pod>/plugins/kubernetes.io~empty-dir/<name>/ready.
func (m *Manager) emptyDirReadyFile(uid types.UID, name string) string {
	return filepath.Join(m.PodDir(uid), "plugins", emptyDirPluginDir, name, "ready")
}

func (m *Manager) emptyDirReady(uid types.UID, name string) bool {
	_, err := os.Stat(m.emptyDirReadyFile(uid, name))
	return err == nil
}

// markEmptyDirReady records that the volume is set up. A marker that cannot
// be written only means the next setup gives the volume to the fsGroup
// again, so it is logged, as the kubelet's SetReady does.
func (m *Manager) markEmptyDirReady(uid types.UID, name string) {
	f := m.emptyDirReadyFile(uid, name)
	err := os.MkdirAll(filepath.Dir(f), 0o750)
	if err == nil {
		err = os.WriteFile(f, nil, 0o600)
	}
	if err != nil {
		m.log.Warn("emptyDir: marking the volume ready failed", "podUID", uid, "volume", name, "err", err)
	}
}

// setupHugetlbfs mounts a hugetlbfs of the page size the medium and the
// pod's huge page requests call for on dir, unless something is mounted
// there already, as the kubelet's emptyDir setupHugepages does; it reports
// whether it mounted one now. The pod's hugetlb cgroup limit, not the
// mount, bounds how many pages it takes.
func (m *Manager) setupHugetlbfs(pod *v1.Pod, name, dir string, medium v1.StorageMedium) (bool, error) {
	size, err := v1helper.HugePagesPageSize(&pod.Spec, medium)
	if err != nil {
		return false, err
	}
	mounted, err := m.mounter.IsMountPoint(dir)
	if err != nil || mounted {
		return false, err
	}
	if err := m.mounter.MountHugetlbfs(dir, size.String()); err != nil {
		return false, err
	}
	m.log.Info("mounted hugetlbfs volume", "podUID", pod.UID, "volume", name, "path", dir, "pageSize", size.String())
	return true, nil
}

// setupTmpfs mounts a tmpfs on dir unless one is already there, and reports
// whether it mounted one now; sizeLimit, when set, caps it. Without one the
// tmpfs takes the kernel's default.
func (m *Manager) setupTmpfs(uid types.UID, name, dir string, sizeLimit *resource.Quantity) (bool, error) {
	mounted, err := m.mounter.IsMountPoint(dir)
	if err != nil {
		return false, err
	}
	if mounted {
		return false, nil
	}
	var size int64
	if sizeLimit != nil {
		size = sizeLimit.Value()
	}
	if err := m.mounter.MountTmpfs(dir, size); err != nil {
		return false, err
	}
	m.log.Info("mounted tmpfs volume", "podUID", uid, "volume", name, "path", dir, "sizeBytes", size)
	return true, nil
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
