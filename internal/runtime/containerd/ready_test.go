package containerd

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCRIReady(t *testing.T) {
	cond := func(typ string, ok bool, reason, msg string) *runtimeapi.RuntimeCondition {
		return &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name   string
		status *runtimeapi.RuntimeStatus
		want   string // "" means ready
	}{
		{"both true", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, true, "", ""), cond(runtimeapi.NetworkReady, true, "", ""),
		}}, ""},
		{"network not ready, with containerd's reason", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, true, "", ""),
			cond(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni plugin not initialized"),
		}}, `CRI condition NetworkReady is false: reason "NetworkPluginNotReady", message "cni plugin not initialized"`},
		{"runtime not ready", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, false, "Starting", "recovering"), cond(runtimeapi.NetworkReady, true, "", ""),
		}}, `CRI condition RuntimeReady is false: reason "Starting", message "recovering"`},
		{"both false: both named", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, false, "A", "a"), cond(runtimeapi.NetworkReady, false, "B", "b"),
		}}, "CRI condition RuntimeReady is false: reason \"A\", message \"a\"\nCRI condition NetworkReady is false: reason \"B\", message \"b\""},
		{"a condition missing", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, true, "", ""),
		}}, "CRI status has no NetworkReady condition"},
		{"no status at all", nil, "CRI status has no RuntimeReady condition\nCRI status has no NetworkReady condition"},
		{"other conditions do not count", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond("ContainerdHasNoDeprecationWarnings", false, "", ""),
			cond(runtimeapi.RuntimeReady, true, "", ""), cond(runtimeapi.NetworkReady, true, "", ""),
		}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := criReady(tc.status)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("criReady = %q, want %q", got, tc.want)
			}
		})
	}
}
