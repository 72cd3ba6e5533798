package noderuntime

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CheckCgroupDriver compares the cgroup driver the runtime reports
// (RuntimeConfig's answer resp, or its error) with berth's. The v1.36
// kubelet takes the runtime's driver as its own (KubeletCgroupDriverFromCRI);
// berth runs the one it is configured with (only cgroupfs today), so a
// runtime on another driver is refused at start: its containers' cgroups
// would be created where berth's pod cgroups are not. A runtime without
// the call (codes.Unimplemented: containerd before 2.0) is taken to use
// berth's, as the kubelet falls back to its config; any other error is the
// runtime's failure to start.
func CheckCgroupDriver(configured string, resp *runtimeapi.RuntimeConfigResponse, err error) error {
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return nil
		}
		return fmt.Errorf("runtime config (its cgroup driver): %w", err)
	}
	linux := resp.GetLinux()
	if linux == nil {
		return nil // the runtime says nothing of Linux: nothing to compare
	}
	var theirs string
	switch d := linux.GetCgroupDriver(); d {
	case runtimeapi.CgroupDriver_SYSTEMD:
		theirs = "systemd"
	case runtimeapi.CgroupDriver_CGROUPFS:
		theirs = "cgroupfs"
	default:
		return fmt.Errorf("the runtime reports an unknown cgroup driver %d", d)
	}
	if !strings.EqualFold(theirs, configured) {
		return fmt.Errorf("the runtime uses the %s cgroup driver and berth's cgroupDriver (--cgroup-driver) is %s: configure the runtime for %s (containerd: SystemdCgroup = false in its runc options)", theirs, configured, configured)
	}
	return nil
}
