package containergc

import (
	"testing"
	"time"
)

func TestDefaultPolicy(t *testing.T) {
	// The kubelet's: keep one dead instance per container, no node limit,
	// no minimum age.
	if got, want := DefaultPolicy(), (Policy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}); got != want {
		t.Errorf("DefaultPolicy() = %+v, want %+v", got, want)
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		policy Policy
		want   string
	}{
		{DefaultPolicy(), ""},
		{Policy{MinAge: time.Hour, MaxPerPodContainer: 0, MaxContainers: 0}, ""},
		{Policy{MaxPerPodContainer: -5, MaxContainers: -7}, ""},
		{Policy{MinAge: -time.Second}, "--minimum-container-ttl-duration: -1s: must not be negative"},
	}
	for _, tt := range tests {
		err := tt.policy.Validate()
		if got := errString(err); got != tt.want {
			t.Errorf("%+v.Validate() = %q, want %q", tt.policy, got, tt.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
