package main

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/images"
)

func TestImageTable(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	list := []images.ImageStatus{
		{ID: "sha256:0123456789abcdef0123", RepoTags: []string{"berth.local/pause:1.0"}, Size: 1_500_000,
			FirstDetected: time.Time{}, Pinned: true, Verdict: "pinned (sandbox image)"},
		{ID: "sha256:fedcba9876543210fedc", Size: 999, FirstDetected: now.Add(-2 * time.Minute), LastUsed: now.Add(-time.Minute),
			Verdict: "collectable: least recently used first"},
	}
	want := `IMAGE                  ID                   SIZE    FIRST SEEN    LAST USED  GC
berth.local/pause:1.0  sha256:0123456789ab  1.5 MB  before start  -          pinned (sandbox image)
<none>                 sha256:fedcba987654  999 B   2m ago        60s ago    collectable: least recently used first
`
	if got := imageTable(list, now); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
