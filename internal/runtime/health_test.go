package runtime

import (
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRuntimeReady(t *testing.T) {
	tests := []struct {
		name    string
		conds   []*runtimeapi.RuntimeCondition
		wantErr string
	}{
		{"ready", []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.NetworkReady, Status: false, Reason: "NetworkPluginNotReady"},
			{Type: runtimeapi.RuntimeReady, Status: true},
		}, ""},
		{"not ready", []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: false, Reason: "Starting", Message: "loading plugins"},
		}, "the runtime is not ready: Starting: loading plugins"},
		{"silent", nil, "the runtime reports no RuntimeReady condition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runtimeReady(&runtimeapi.RuntimeStatus{Conditions: tt.conds})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
