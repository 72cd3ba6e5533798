package noderuntime

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCheckCgroupDriver(t *testing.T) {
	driver := func(d runtimeapi.CgroupDriver) *runtimeapi.RuntimeConfigResponse {
		return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}}
	}
	for _, tc := range []struct {
		name    string
		resp    *runtimeapi.RuntimeConfigResponse
		err     error
		wantErr string
	}{
		{"the same driver", driver(runtimeapi.CgroupDriver_CGROUPFS), nil, ""},
		{"systemd against cgroupfs", driver(runtimeapi.CgroupDriver_SYSTEMD), nil, "the runtime uses the systemd cgroup driver and berth's cgroupDriver (--cgroup-driver) is cgroupfs"},
		{"an unknown driver", driver(runtimeapi.CgroupDriver(7)), nil, "unknown cgroup driver 7"},
		{"no linux section", &runtimeapi.RuntimeConfigResponse{}, nil, ""},
		{"containerd 1.6: unimplemented", nil, status.Error(codes.Unimplemented, "unknown method RuntimeConfig"), ""},
		{"another error", nil, errors.New("connection refused"), "runtime config (its cgroup driver): connection refused"},
	} {
		err := CheckCgroupDriver("cgroupfs", tc.resp, tc.err)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
