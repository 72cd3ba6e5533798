package volume

// Mounter is the mount I/O the volume manager needs, behind an interface so
// that tests of pure logic can fake it.
type Mounter interface {
	// MountTmpfs mounts a new tmpfs at target; sizeBytes <= 0 leaves the
	// kernel's default size (half of RAM).
	MountTmpfs(target string, sizeBytes int64) error
	// MountHugetlbfs mounts a new hugetlbfs of pages of pageSize ("2Mi")
	// at target.
	MountHugetlbfs(target, pageSize string) error
	Unmount(target string) error
	// IsMountPoint reports whether path is the root of a mount, bind mounts
	// included.
	IsMountPoint(path string) (bool, error)
}
