package volume

import (
	"fmt"
	"strconv"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// NewMounter returns the Mounter that mounts for real.
func NewMounter() Mounter { return hostMounter{} }

type hostMounter struct{}

func (hostMounter) MountTmpfs(target string, sizeBytes int64) error {
	data := ""
	if sizeBytes > 0 {
		data = "size=" + strconv.FormatInt(sizeBytes, 10)
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", 0, data); err != nil {
		return fmt.Errorf("mounting tmpfs on %s: %w", target, err)
	}
	return nil
}

func (hostMounter) MountHugetlbfs(target, pageSize string) error {
	// nodev, as the kubelet mounts it; the kernel's memparse reads "2Mi"
	// as 2M and ignores the "i".
	if err := unix.Mount("nodev", target, "hugetlbfs", 0, "pagesize="+pageSize); err != nil {
		return fmt.Errorf("mounting hugetlbfs (pagesize=%s) on %s: %w", pageSize, target, err)
	}
	return nil
}

func (hostMounter) Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmounting %s: %w", target, err)
	}
	return nil
}

func (hostMounter) IsMountPoint(path string) (bool, error) {
	mounted, err := mountinfo.Mounted(path)
	if err != nil {
		return false, fmt.Errorf("checking whether %s is a mount point: %w", path, err)
	}
	return mounted, nil
}
