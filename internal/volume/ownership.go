package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// The group bits fsGroup ownership adds (pkg/volume/volume_linux.go): rw
// for a writable volume's files (rwMask), r for a read-only one's (roMask);
// directories also get execMask and setgid, so that files created later
// inherit the group.
const (
	readWriteGroupMask os.FileMode = 0o660
	readOnlyGroupMask  os.FileMode = 0o440
	execMask           os.FileMode = 0o110
)

// setVolumeOwnership gives everything under dir to group gid and opens it
// to that group, read-only or read-write, as the kubelet's
// SetVolumeOwnership (changeFilePermission) does. The owner is kept.
// Symlinks are chowned but never chmodded: that would change their target.
func setVolumeOwnership(dir string, gid int64, readOnly bool) error {
	mask := readWriteGroupMask
	if readOnly {
		mask = readOnlyGroupMask
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(gid)); err != nil {
			return fmt.Errorf("fsGroup ownership: %w", err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if d.IsDir() {
			m |= execMask | os.ModeSetgid
		}
		if err := os.Chmod(path, info.Mode()|m); err != nil {
			return fmt.Errorf("fsGroup ownership: %w", err)
		}
		return nil
	})
}

func podFSGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// fsUserFrom is the one user every container of pod runs as, when they all
// set one (in their own or the pod's security context) and it is the same
// (the kubelet's FsUserFrom); nil otherwise.
func fsUserFrom(pod *v1.Pod) *int64 {
	var user *int64
	var podUser *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		podUser = sc.RunAsUser
	}
	same := func(c *v1.Container) bool {
		u := podUser
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			u = c.SecurityContext.RunAsUser
		}
		if u == nil || (user != nil && *user != *u) {
			return false
		}
		user = u
		return true
	}
	for i := range pod.Spec.InitContainers {
		if !same(&pod.Spec.InitContainers[i]) {
			return nil
		}
	}
	for i := range pod.Spec.Containers {
		if !same(&pod.Spec.Containers[i]) {
			return nil
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if !same(&c) {
			return nil
		}
	}
	return user
}

// SetVolumeOwnership gives a volume mounted by someone else (a CSI driver)
// the pod's fsGroup, as the kubelet does after SetUp where the driver does
// not apply it itself.
func SetVolumeOwnership(dir string, gid int64, readOnly bool) error {
	return setVolumeOwnership(dir, gid, readOnly)
}
