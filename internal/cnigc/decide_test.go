package cnigc

import (
	"maps"
	"slices"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	grace := 3 * time.Minute
	for _, tc := range []struct {
		name     string
		pass     Pass
		suspects map[string]time.Time
		collect  []string
		next     map[string]time.Time
	}{
		{
			name:     "known IDs are kept and forget their suspicion",
			pass:     Pass{Held: []string{"a"}, Known: map[string]bool{"a": true}, Now: t0},
			suspects: map[string]time.Time{"a": t0.Add(-time.Hour)},
			next:     map[string]time.Time{},
		},
		{
			name: "an unknown ID is suspected first, not collected",
			pass: Pass{Held: []string{"a"}, Now: t0},
			next: map[string]time.Time{"a": t0},
		},
		{
			name:     "still unknown within the grace: kept, first sighting kept",
			pass:     Pass{Held: []string{"a"}, Now: t0.Add(grace - time.Second)},
			suspects: map[string]time.Time{"a": t0},
			next:     map[string]time.Time{"a": t0},
		},
		{
			name:     "unknown over the whole grace: collected",
			pass:     Pass{Held: []string{"a", "b"}, Known: map[string]bool{"b": true}, Now: t0.Add(grace)},
			suspects: map[string]time.Time{"a": t0},
			collect:  []string{"a"},
			next:     map[string]time.Time{},
		},
		{
			name: "unknown at a quiet moment: collected at once",
			pass: Pass{Held: []string{"b", "a", "c"}, Known: map[string]bool{"c": true},
				Quiet: map[string]bool{"a": true, "b": true, "c": true}, Now: t0},
			collect: []string{"a", "b"},
			next:    map[string]time.Time{},
		},
		{
			name: "held only after the quiet moment: suspected like any other",
			pass: Pass{Held: []string{"new"}, Quiet: map[string]bool{"old": true}, Now: t0},
			next: map[string]time.Time{"new": t0},
		},
		{
			name:     "no longer held: forgotten",
			pass:     Pass{Now: t0.Add(time.Hour)},
			suspects: map[string]time.Time{"gone": t0},
			next:     map[string]time.Time{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			collect, next := Decide(tc.pass, tc.suspects, grace)
			if !slices.Equal(collect, tc.collect) {
				t.Errorf("collect %v, want %v", collect, tc.collect)
			}
			if !maps.Equal(next, tc.next) {
				t.Errorf("next %v, want %v", next, tc.next)
			}
		})
	}
}
