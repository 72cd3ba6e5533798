package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// readOnlyGroupMask is what fsGroup ownership adds to a read-only volume's
// files (the kubelet's roMask); directories also get execMask and setgid,
// so that files created later inherit the group.
const (
	readOnlyGroupMask os.FileMode = 0o440
	execMask          os.FileMode = 0o110
)

// setVolumeOwnership gives everything under dir to group gid and makes it
// readable by that group, as the kubelet's SetVolumeOwnership does for the
// read-only volumes written from the API. Symlinks are chowned but never
// chmodded: that would change their target.
func setVolumeOwnership(dir string, gid int64) error {
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
		mask := readOnlyGroupMask
		if d.IsDir() {
			mask |= execMask | os.ModeSetgid
		}
		if err := os.Chmod(path, info.Mode()|mask); err != nil {
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
