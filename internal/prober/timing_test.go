package prober

import (
	"fmt"
	"testing"
	"time"
)

func TestSlotAtOrAfter(t *testing.T) {
	p := 10 * time.Second
	cases := []struct {
		t, want time.Duration // offsets from t0, the anchor
	}{
		{-5 * time.Second, 0},
		{0, 0},
		{time.Nanosecond, p},
		{p, p},
		{p + 1, 2 * p},
		{95 * time.Second, 100 * time.Second},
	}
	for _, tc := range cases {
		if got := slotAtOrAfter(t0, p, t0.Add(tc.t)); !got.Equal(t0.Add(tc.want)) {
			t.Errorf("slotAtOrAfter(t0+%v) = t0+%v, want t0+%v", tc.t, got.Sub(t0), tc.want)
		}
	}
}

func TestPhaseIsStableAndSpread(t *testing.T) {
	p := time.Second
	if phase("abc", p) != phase("abc", p) {
		t.Fatal("phase is not a function of the container ID")
	}
	// 1000 containers over 10 buckets of 100ms: none may be empty or hold
	// more than twice its share.
	var buckets [10]int
	for i := range 1000 {
		ph := phase(fmt.Sprintf("%064x", i*7919), p)
		if ph < 0 || ph >= p {
			t.Fatalf("phase %v outside [0, %v)", ph, p)
		}
		buckets[ph/(100*time.Millisecond)]++
	}
	for i, n := range buckets {
		if n == 0 || n > 200 {
			t.Errorf("bucket %d holds %d of 1000 phases: %v", i, n, buckets)
		}
	}
}

func TestProbeDue(t *testing.T) {
	const id = "c1"
	p := 10 * time.Second
	ph := phase(id, p)
	cfg := probeConfig{probeType: Readiness, period: p, initialDelay: 5 * time.Second}
	started := t0
	grid := started.Add(5*time.Second + ph) // the container's beat
	cases := []struct {
		name       string
		agentStart time.Time
		lastProbe  time.Time
		want       time.Time
	}{{
		name:       "first probe of a new container: right when the initial delay has passed",
		agentStart: t0.Add(-time.Hour),
		want:       t0.Add(5 * time.Second),
	}, {
		name:       "a container started in the manager's first second counts as new",
		agentStart: t0.Add(500 * time.Millisecond),
		want:       t0.Add(5 * time.Second),
	}, {
		name:       "first probe after a berth restart: the container's next slot",
		agentStart: t0.Add(time.Hour + 3*time.Second),
		want:       slotAtOrAfter(grid, p, t0.Add(time.Hour+3*time.Second)),
	}, {
		name:       "restart during the initial delay: still not before it",
		agentStart: t0.Add(2 * time.Second),
		want:       slotAtOrAfter(grid, p, t0.Add(5*time.Second)),
	}, {
		name:       "next probe: the first slot at least half a period later",
		agentStart: t0.Add(-time.Hour),
		lastProbe:  t0.Add(5 * time.Second),
		want:       slotAtOrAfter(grid, p, t0.Add(10*time.Second)),
	}, {
		name:       "on the beat: exactly one period later",
		agentStart: t0.Add(-time.Hour),
		lastProbe:  grid.Add(3 * p),
		want:       grid.Add(4 * p),
	}, {
		name:       "a late probe does not shift the beat",
		agentStart: t0.Add(-time.Hour),
		lastProbe:  grid.Add(3*p + 2*time.Second),
		want:       grid.Add(4 * p),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := probeState{containerID: id, lastProbe: tc.lastProbe}
			o := observation{startedAt: started, agentStart: tc.agentStart}
			got := probeDue(cfg, s, o)
			if !got.Equal(tc.want) {
				t.Errorf("due t0+%v, want t0+%v", got.Sub(t0), tc.want.Sub(t0))
			}
			if !tc.lastProbe.IsZero() {
				if gap := got.Sub(tc.lastProbe); gap < p/2 || gap >= 3*p/2 {
					t.Errorf("gap after the last probe %v outside [P/2, 3P/2)", gap)
				}
			}
		})
	}
}
