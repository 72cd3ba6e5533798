package stats

import (
	"os"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fsInfo is a filesystem's size and free space, from statfs.
type fsInfo struct {
	Capacity   uint64
	Available  uint64 // to unprivileged users (f_bavail), as df and the kubelet report
	Used       uint64
	Inodes     uint64
	InodesFree uint64
}

func statFS(path string) (fsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsInfo{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	return fsInfoOf(&st), nil
}

// fsInfoOf converts statfs's answer the way cadvisor does: block counts are
// in fragment-size units (f_frsize), and used is total − free, so it
// includes the root-reserved blocks.
func fsInfoOf(st *unix.Statfs_t) fsInfo {
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return fsInfo{
		Capacity:   st.Blocks * unit,
		Available:  st.Bavail * unit,
		Used:       (st.Blocks - min(st.Bfree, st.Blocks)) * unit,
		Inodes:     st.Files,
		InodesFree: st.Ffree,
	}
}

// toStats is the whole filesystem's use: Node.Fs, ImageFs.
func (f fsInfo) toStats(now metav1.Time) *statsapi.FsStats {
	s := f.sizeOnly(now)
	s.UsedBytes = ptr(f.Used)
	s.InodesUsed = ptr(f.Inodes - min(f.InodesFree, f.Inodes))
	return s
}

// sizeOnly is the filesystem's size without any usage: the frame for the
// usage of one part of it (a container's rootfs, logs, a volume).
func (f fsInfo) sizeOnly(now metav1.Time) *statsapi.FsStats {
	return &statsapi.FsStats{
		Time:           now,
		CapacityBytes:  ptr(f.Capacity),
		AvailableBytes: ptr(f.Available),
		Inodes:         ptr(f.Inodes),
		InodesFree:     ptr(f.InodesFree),
	}
}

// usageOn is a part's usage on filesystem f; a nil f (its size unknown)
// leaves the size fields out.
func usageOn(f *fsInfo, u diskUsage, now metav1.Time) *statsapi.FsStats {
	s := &statsapi.FsStats{Time: now}
	if f != nil {
		s = f.sizeOnly(now)
	}
	s.UsedBytes = ptr(u.Bytes)
	s.InodesUsed = ptr(u.Inodes)
	return s
}

// deviceOf is the device of the filesystem path is on.
func deviceOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return st.Dev, nil
}
