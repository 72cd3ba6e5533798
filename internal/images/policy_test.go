package images

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(p *Policy)
		want   []string // every line of the error, in order; none when valid
	}{
		{name: "kubelet defaults", modify: func(*Policy) {}},
		{name: "GC off", modify: func(p *Policy) { p.HighThresholdPercent, p.LowThresholdPercent = 100, 100 }},
		{name: "low equal to high", modify: func(p *Policy) { p.LowThresholdPercent = 85 }},
		{name: "zero thresholds", modify: func(p *Policy) { p.HighThresholdPercent, p.LowThresholdPercent = 0, 0 }},
		{name: "maximum age above minimum", modify: func(p *Policy) { p.MaxAge = 2*time.Minute + time.Second }},
		{name: "no minimum age", modify: func(p *Policy) { p.MinAge = 0 }},
		{name: "thresholds out of range", modify: func(p *Policy) { p.HighThresholdPercent, p.LowThresholdPercent = 101, -1 },
			want: []string{
				"imageGCHighThresholdPercent: 101: must be between 0 and 100, inclusive",
				"imageGCLowThresholdPercent: -1: must be between 0 and 100, inclusive",
			}},
		{name: "low above high", modify: func(p *Policy) { p.LowThresholdPercent = 90 },
			want: []string{"imageGCLowThresholdPercent: 90: must not be greater than imageGCHighThresholdPercent 85"}},
		{name: "negative ages", modify: func(p *Policy) { p.MinAge, p.MaxAge = -time.Second, -time.Minute },
			want: []string{"imageMinimumGCAge: -1s: must not be negative", "imageMaximumGCAge: -1m0s: must not be negative"}},
		{name: "maximum age equal to minimum", modify: func(p *Policy) { p.MaxAge = 2 * time.Minute },
			want: []string{"imageMaximumGCAge: 2m0s: must be greater than imageMinimumGCAge 2m0s"}},
		{name: "maximum age below minimum", modify: func(p *Policy) { p.MaxAge = time.Minute },
			want: []string{"imageMaximumGCAge: 1m0s: must be greater than imageMinimumGCAge 2m0s"}},
		{name: "everything wrong at once", modify: func(p *Policy) {
			*p = Policy{HighThresholdPercent: -5, LowThresholdPercent: 200, MinAge: -time.Hour, MaxAge: -time.Hour}
		},
			want: []string{
				"imageGCHighThresholdPercent: -5: must be between 0 and 100, inclusive",
				"imageGCLowThresholdPercent: 200: must be between 0 and 100, inclusive",
				"imageGCLowThresholdPercent: 200: must not be greater than imageGCHighThresholdPercent -5",
				"imageMinimumGCAge: -1h0m0s: must not be negative",
				"imageMaximumGCAge: -1h0m0s: must not be negative",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			tt.modify(&p)
			err := p.Validate()
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultPolicyIsTheKubelets(t *testing.T) {
	want := Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}
	if got := DefaultPolicy(); got != want {
		t.Errorf("DefaultPolicy() = %+v, want %+v", got, want)
	}
}

func TestNewManagerRejectsAnInvalidPolicy(t *testing.T) {
	e := newEnv(t, DefaultPolicy())
	_, err := NewManager(Options{Policy: Policy{HighThresholdPercent: 50, LowThresholdPercent: 60}, Runtime: e.rt, FsStats: e.node.fsStats, InUse: e.node.inUseRefs, Clock: e.clk})
	if err == nil || !strings.Contains(err.Error(), "imageGCLowThresholdPercent: 60") {
		t.Errorf("NewManager() error = %v, want one naming imageGCLowThresholdPercent", err)
	}
	if _, err := NewManager(Options{Policy: DefaultPolicy(), Runtime: e.rt, Clock: e.clk}); err == nil {
		t.Error("NewManager() without filesystem stats and images in use succeeded")
	}
}

func TestPeriodic(t *testing.T) {
	tests := []struct {
		p    Policy
		want bool
	}{
		{DefaultPolicy(), true},
		{Policy{HighThresholdPercent: 100, LowThresholdPercent: 80}, false},
		{Policy{HighThresholdPercent: 100, LowThresholdPercent: 80, MaxAge: time.Hour}, true},
		{Policy{HighThresholdPercent: 99, LowThresholdPercent: 80}, true},
	}
	for _, tt := range tests {
		if got := tt.p.periodic(); got != tt.want {
			t.Errorf("%+v.periodic() = %v, want %v", tt.p, got, tt.want)
		}
	}
}
