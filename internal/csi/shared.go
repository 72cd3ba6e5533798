package csi

import (
	"fmt"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// RootShared says whether root is on a shared mount. A driver that runs in
// a container mounts under root in its own mount namespace, and its mounts
// reach berth and the runtime only through a shared mount (the driver's
// Bidirectional propagation, which the runtime refuses on a private one).
// The kubelet makes its root dir rshared as it starts (MakeRShared); berth
// only tells, since bind-mounting the root dir onto itself would outlive
// berth and hide the mounts of the pods already there.
func RootShared(root string) (bool, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(root))
	if err != nil {
		return false, fmt.Errorf("reading the mount table: %w", err)
	}
	return sharedIn(mounts), nil
}

// sharedIn says whether the innermost of the mounts (those holding a path)
// is shared: its optional fields have a shared:N peer group.
func sharedIn(mounts []*mountinfo.Info) bool {
	var in *mountinfo.Info
	for _, m := range mounts {
		if in == nil || len(m.Mountpoint) >= len(in.Mountpoint) {
			in = m
		}
	}
	if in == nil {
		return false
	}
	for _, f := range strings.Fields(in.Optional) {
		if strings.HasPrefix(f, "shared:") {
			return true
		}
	}
	return false
}
