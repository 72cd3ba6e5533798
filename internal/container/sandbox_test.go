package container

import "testing"

func TestSandboxChange(t *testing.T) {
	ready := SandboxStatus{ID: "new", Ready: true, IP: "10.0.0.2"}
	tests := []struct {
		name        string
		sandboxes   []SandboxStatus
		hostNetwork bool
		want        string
	}{
		{"none", nil, false, SandboxMissing},
		{"newest ready with an IP", []SandboxStatus{ready, {ID: "old"}}, false, ""},
		{"two ready", []SandboxStatus{ready, {ID: "old", Ready: true}}, false, SandboxMultipleReady},
		{"newest not ready", []SandboxStatus{{ID: "new"}}, false, SandboxNotReady},
		{"host network wanted now", []SandboxStatus{ready}, true, SandboxNetworkModeChanged},
		{"bridge sandbox without an IP", []SandboxStatus{{ID: "new", Ready: true}}, false, SandboxHasNoIP},
		{"host network needs no IP", []SandboxStatus{{ID: "new", Ready: true, HostNetwork: true}}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &PodStatus{Sandboxes: tt.sandboxes}
			if got := st.SandboxChange(tt.hostNetwork); got != tt.want {
				t.Errorf("SandboxChange = %q, want %q", got, tt.want)
			}
		})
	}
}
