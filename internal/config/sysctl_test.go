package config

import (
	"slices"
	"strings"
	"testing"
)

// TestLoadAllowedUnsafeSysctls checks allowedUnsafeSysctls from the file and
// --allowed-unsafe-sysctls: the flag replaces the file's list, the
// effective list is written back, the field is no longer reported as
// unimplemented, and a pattern the kubelet would refuse at start-up stops
// berth with the option named.
func TestLoadAllowedUnsafeSysctls(t *testing.T) {
	file := header + "allowedUnsafeSysctls: [\"kernel.msg*\", \"net.core.somaxconn\"]\n"
	for _, tc := range []struct {
		name    string
		file    string
		args    []string
		want    []string
		wantErr string
	}{
		{name: "default", want: nil},
		{name: "file", file: file, want: []string{"kernel.msg*", "net.core.somaxconn"}},
		{name: "flag", args: []string{"--allowed-unsafe-sysctls=kernel.sem,net.*"}, want: []string{"kernel.sem", "net.*"}},
		{name: "flag over file", file: file, args: []string{"--allowed-unsafe-sysctls", "kernel.shm*"}, want: []string{"kernel.shm*"}},
		{name: "not namespaced, flag", args: []string{"--allowed-unsafe-sysctls=kernel.panic"},
			wantErr: `allowedUnsafeSysctls (--allowed-unsafe-sysctls): the sysctls "kernel.panic" are not known to be namespaced`},
		{name: "not namespaced, file", file: header + "allowedUnsafeSysctls: [\"vm.*\"]\n",
			wantErr: `allowedUnsafeSysctls (--allowed-unsafe-sysctls): the sysctls "vm." are not known to be namespaced`},
		{name: "not a pattern", args: []string{"--allowed-unsafe-sysctls=Net.Core"},
			wantErr: `allowedUnsafeSysctls (--allowed-unsafe-sysctls): sysctl "Net.Core" must have at most 253 characters`},
	} {
		cfg, err := loadWith(t, tc.file, tc.args, testHost)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(cfg.AllowedUnsafeSysctls, tc.want) || !slices.Equal(cfg.Kubelet.AllowedUnsafeSysctls, tc.want) {
			t.Errorf("%s: %q (written back %q), want %q", tc.name, cfg.AllowedUnsafeSysctls, cfg.Kubelet.AllowedUnsafeSysctls, tc.want)
		}
		if slices.Contains(cfg.Unimplemented, "allowedUnsafeSysctls") {
			t.Errorf("%s: allowedUnsafeSysctls reported as unimplemented", tc.name)
		}
	}
}
