package logs

import (
	"slices"
	"testing"
	"time"
)

func TestPlanRotation(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 30, 45, 0, time.UTC)
	const log = "/logs/pod/app/0.log"
	const stamp = "0.log.20261127-123045"
	policy := Policy{MaxSize: 100, MaxFiles: 4}
	tests := []struct {
		name     string
		size     int64
		siblings []string
		policy   Policy
		want     rotation
	}{
		{name: "under the size: nothing, leftovers included", size: 99,
			siblings: []string{"0.log", "0.log.20261127-120000.tmp"}},
		{name: "rotation off", size: 1 << 40, policy: Policy{MaxSize: -1, MaxFiles: 4}, siblings: []string{"0.log"}},
		{name: "at the size, first rotation", size: 100, siblings: []string{"0.log"},
			want: rotation{rotated: "/logs/pod/app/" + stamp}},
		{name: "the previous rotated file is compressed", size: 150,
			siblings: []string{"0.log", "0.log.20261127-120000"},
			want:     rotation{compress: []string{"/logs/pod/app/0.log.20261127-120000"}, rotated: "/logs/pod/app/" + stamp}},
		{name: "MaxFiles-2 rotated files are kept, the oldest removed", size: 100,
			siblings: []string{"0.log", "0.log.20261127-120300", "0.log.20261127-120000.gz", "0.log.20261127-120100.gz", "0.log.20261127-120200.gz"},
			want: rotation{
				remove:   []string{"/logs/pod/app/0.log.20261127-120000.gz", "/logs/pod/app/0.log.20261127-120100.gz"},
				compress: []string{"/logs/pod/app/0.log.20261127-120300"},
				rotated:  "/logs/pod/app/" + stamp}},
		{name: "two files: no rotated file is kept beyond the one made now", size: 100, policy: Policy{MaxSize: 100, MaxFiles: 2},
			siblings: []string{"0.log", "0.log.20261127-120000"},
			want:     rotation{remove: []string{"/logs/pod/app/0.log.20261127-120000"}, rotated: "/logs/pod/app/" + stamp}},
		{name: "leftovers of an interrupted compression are removed", size: 100,
			siblings: []string{"0.log", "0.log.20261127-120000", "0.log.20261127-120000.gz", "0.log.20261127-120100.tmp"},
			want: rotation{
				remove:  []string{"/logs/pod/app/0.log.20261127-120000", "/logs/pod/app/0.log.20261127-120100.tmp"},
				rotated: "/logs/pod/app/" + stamp}},
		{name: "other containers' and instances' logs are not touched", size: 100,
			siblings: []string{"0.log", "1.log", "1.log.20261127-120000", "10.log.20261127-120000"},
			want:     rotation{rotated: "/logs/pod/app/" + stamp}},
		{name: "a rotation in the same second waits for the next round", size: 100,
			siblings: []string{"0.log", stamp},
			want:     rotation{compress: []string{"/logs/pod/app/" + stamp}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			if p == (Policy{}) {
				p = policy
			}
			got := planRotation(log, tt.size, tt.siblings, now, p)
			if !slices.Equal(got.remove, tt.want.remove) || !slices.Equal(got.compress, tt.want.compress) || got.rotated != tt.want.rotated {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
