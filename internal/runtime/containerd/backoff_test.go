package containerd

import (
	"testing"
	"time"
)

func TestRestartBackoff(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		up    bool // else down
		at    time.Duration
		delay time.Duration // what down returns
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a long-running containerd dies: restarted at once", []step{
			{up: true, at: 0}, {at: time.Hour, delay: 0},
		}},
		{"failed starts wait 1s, 2s, 4s... up to 30s", []step{
			{up: true, at: 0}, {at: time.Hour, delay: 0},
			{at: time.Hour + time.Second, delay: time.Second},
			{at: time.Hour + 2*time.Second, delay: 2 * time.Second},
			{at: time.Hour + 3*time.Second, delay: 4 * time.Second},
			{at: time.Hour + 4*time.Second, delay: 8 * time.Second},
			{at: time.Hour + 5*time.Second, delay: 16 * time.Second},
			{at: time.Hour + 6*time.Second, delay: 30 * time.Second},
			{at: time.Hour + 7*time.Second, delay: 30 * time.Second},
		}},
		{"one that dies soon after each start backs off too", []step{
			{up: true, at: 0}, {at: 10 * time.Minute, delay: 0},
			{up: true, at: 10 * time.Minute}, {at: 10*time.Minute + 5*time.Second, delay: time.Second},
			{up: true, at: 10*time.Minute + 6*time.Second}, {at: 10*time.Minute + 9*time.Second, delay: 2 * time.Second},
		}},
		{"staying up for a minute forgets the failures", []step{
			{at: 0, delay: 0},
			{at: time.Second, delay: time.Second},
			{at: 3 * time.Second, delay: 2 * time.Second},
			{up: true, at: 5 * time.Second},
			{at: 5*time.Second + time.Minute, delay: 0},
			{at: 6*time.Second + time.Minute, delay: time.Second},
		}},
		{"just short of a minute does not", []step{
			{at: 0, delay: 0},
			{up: true, at: time.Second},
			{at: time.Second + time.Minute - time.Millisecond, delay: time.Second},
		}},
		{"a start that fails right after a death counts as quick", []step{
			{up: true, at: 0}, {at: time.Hour, delay: 0},
			{at: time.Hour, delay: time.Second},
			{up: true, at: time.Hour + time.Second}, {at: 2 * time.Hour, delay: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRestartBackoff()
			for i, s := range tc.steps {
				if s.up {
					b.up(at(s.at))
					continue
				}
				if got := b.down(at(s.at)); got != s.delay {
					t.Fatalf("step %d (down at +%v): delay %v, want %v", i, s.at, got, s.delay)
				}
			}
		})
	}
}
