package images

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestImageFsUsage(t *testing.T) {
	def := DefaultPolicy()
	tiB := uint64(1) << 40
	tests := []struct {
		name                string
		capacity, available uint64
		p                   Policy
		want                fsUsage
		wantErr             error
	}{
		{name: "below high", capacity: 100, available: 90, p: def, want: fsUsage{percent: 10}},
		{name: "just below high", capacity: 100, available: 16, p: def, want: fsUsage{percent: 84}},
		{name: "at high", capacity: 100, available: 15, p: def, want: fsUsage{percent: 85, over: true, bytesToFree: 5}},
		{name: "above high", capacity: 100, available: 9, p: def, want: fsUsage{percent: 91, over: true, bytesToFree: 11}},
		{name: "full", capacity: 100, available: 0, p: def, want: fsUsage{percent: 100, over: true, bytesToFree: 20}},
		{name: "integer percent floors the available share", capacity: 1000, available: 159, p: def,
			want: fsUsage{percent: 85, over: true, bytesToFree: 41}},
		{name: "rounding puts usage at high while above low: negative", capacity: 1000, available: 159,
			p:    Policy{HighThresholdPercent: 85, LowThresholdPercent: 85},
			want: fsUsage{percent: 85, over: true, bytesToFree: -9}},
		{name: "large filesystem", capacity: tiB, available: tiB / 8, p: def,
			want: fsUsage{percent: 88, over: true, bytesToFree: int64(tiB)*20/100 - int64(tiB/8)}},
		{name: "high 100 and full", capacity: 100, available: 0, p: Policy{HighThresholdPercent: 100, LowThresholdPercent: 80},
			want: fsUsage{percent: 100, over: true, bytesToFree: 20}},
		{name: "high 100, not full", capacity: 100, available: 1, p: Policy{HighThresholdPercent: 100, LowThresholdPercent: 80},
			want: fsUsage{percent: 99}},
		{name: "available above capacity is clamped", capacity: 100, available: 150, p: def, want: fsUsage{percent: 0, clamped: true}},
		{name: "clamped to a full disk at high 0", capacity: 100, available: 150, p: Policy{},
			want: fsUsage{percent: 0, over: true, bytesToFree: 0, clamped: true}},
		{name: "capacity 0", capacity: 0, available: 0, p: def, wantErr: errInvalidCapacity},
		{name: "capacity 0, available clamped", capacity: 0, available: 7, p: def, want: fsUsage{clamped: true}, wantErr: errInvalidCapacity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imageFsUsage(tt.capacity, tt.available, tt.p)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("imageFsUsage(%d, %d) = %+v, want %+v", tt.capacity, tt.available, got, tt.want)
			}
		})
	}
}

func ids(records []imageRecord) []string {
	var out []string
	for _, r := range records {
		out = append(out, r.id)
	}
	return out
}

func TestChooseImagesToFree(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	minAge := 2 * time.Minute
	old := t0 // detected a day before now
	tests := []struct {
		name   string
		images []imageRecord
		minAge time.Duration
		want   []string
	}{
		{
			name: "least recently used first; never used before any use",
			images: []imageRecord{
				{id: id('a'), firstDetected: old, lastUsed: now.Add(-time.Hour)},
				{id: id('b'), firstDetected: old, lastUsed: now.Add(-3 * time.Hour)},
				{id: id('c'), firstDetected: old},
				{id: id('d'), firstDetected: old, lastUsed: now.Add(-2 * time.Hour)},
			},
			minAge: minAge,
			want:   []string{id('c'), id('b'), id('d'), id('a')},
		},
		{
			name: "equal last use: first detected first, the unknown past before all",
			images: []imageRecord{
				{id: id('a'), firstDetected: old.Add(time.Hour)},
				{id: id('b'), firstDetected: old},
				{id: id('c')},
			},
			minAge: minAge,
			want:   []string{id('c'), id('b'), id('a')},
		},
		{
			name: "all equal: by ID, so the order never depends on a map",
			images: []imageRecord{
				{id: id('c'), firstDetected: old}, {id: id('a'), firstDetected: old}, {id: id('b'), firstDetected: old},
			},
			minAge: minAge,
			want:   []string{id('a'), id('b'), id('c')},
		},
		{
			name: "in use and pinned images are never chosen",
			images: []imageRecord{
				{id: id('a'), firstDetected: old, inUse: true, lastUsed: now},
				{id: id('b'), firstDetected: old, pin: pinnedSandbox},
				{id: id('c'), firstDetected: old, pin: pinnedConfigured},
				{id: id('d'), firstDetected: old, pin: pinnedByRuntime},
				{id: id('e'), firstDetected: old},
			},
			minAge: minAge,
			want:   []string{id('e')},
		},
		{
			name: "used at or after the GC's time: skipped (the seed)",
			images: []imageRecord{
				{id: id('a'), firstDetected: old, lastUsed: now},
				{id: id('b'), firstDetected: old, lastUsed: now.Add(time.Second)},
				{id: id('c'), firstDetected: old, lastUsed: now.Add(-time.Nanosecond)},
			},
			minAge: minAge,
			want:   []string{id('c')},
		},
		{
			name: "younger than the minimum age: skipped; exactly that old: chosen",
			images: []imageRecord{
				{id: id('a'), firstDetected: now.Add(-time.Minute)},
				{id: id('b'), firstDetected: now.Add(-minAge + time.Nanosecond)},
				{id: id('c'), firstDetected: now.Add(-minAge)},
				{id: id('d'), firstDetected: now},
			},
			minAge: minAge,
			want:   []string{id('c')},
		},
		{
			name: "the minimum age counts from first detection, not last use",
			images: []imageRecord{
				{id: id('a'), firstDetected: old, lastUsed: now.Add(-time.Second)},
			},
			minAge: minAge,
			want:   []string{id('a')},
		},
		{
			name:   "no minimum age: even an image detected a moment ago",
			images: []imageRecord{{id: id('a'), firstDetected: now.Add(-time.Nanosecond)}},
			minAge: 0,
			want:   []string{id('a')},
		},
		{name: "nothing", minAge: minAge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(chooseImagesToFree(tt.images, now, tt.minAge)); !slices.Equal(got, tt.want) {
				t.Errorf("chooseImagesToFree() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMaxAgeVictims(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	maxAge := time.Hour
	longAgo := now.Add(-2 * time.Hour) // berth started two hours ago
	tests := []struct {
		name   string
		images []imageRecord
		began  time.Time
		maxAge time.Duration
		want   []string
	}{
		{
			name: "unused for longer than the maximum age, least recently used first",
			images: []imageRecord{
				{id: id('a'), firstDetected: t0, lastUsed: now.Add(-61 * time.Minute)},
				{id: id('b'), firstDetected: t0, lastUsed: now.Add(-90 * time.Minute)},
				{id: id('c'), firstDetected: t0, lastUsed: now.Add(-time.Hour)},
				{id: id('d'), firstDetected: t0, lastUsed: now.Add(-time.Minute)},
			},
			began: longAgo, maxAge: maxAge,
			want: []string{id('b'), id('a')},
		},
		{
			name: "never used: counted from first detection; the unknown past is over",
			images: []imageRecord{
				{id: id('a'), firstDetected: now.Add(-2 * time.Hour)},
				{id: id('b'), firstDetected: now.Add(-30 * time.Minute)},
				{id: id('c')},
			},
			began: longAgo, maxAge: maxAge,
			want: []string{id('c'), id('a')},
		},
		{
			name: "in use and pinned images stay",
			images: []imageRecord{
				{id: id('a'), firstDetected: t0, lastUsed: now.Add(-3 * time.Hour), inUse: true},
				{id: id('b'), pin: pinnedSandbox},
				{id: id('c'), pin: pinnedByRuntime},
				{id: id('d'), pin: pinnedConfigured},
			},
			began: longAgo, maxAge: maxAge,
		},
		{
			name:   "berth has not run for the maximum age yet: nothing",
			images: []imageRecord{{id: id('a')}, {id: id('b'), firstDetected: t0, lastUsed: now.Add(-3 * time.Hour)}},
			began:  now.Add(-time.Hour), maxAge: maxAge,
		},
		{
			name:   "just past it",
			images: []imageRecord{{id: id('a')}},
			began:  now.Add(-time.Hour - time.Nanosecond), maxAge: maxAge,
			want: []string{id('a')},
		},
		{
			name:   "maximum age off",
			images: []imageRecord{{id: id('a')}, {id: id('b'), firstDetected: t0, lastUsed: t0}},
			began:  longAgo, maxAge: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(maxAgeVictims(tt.images, now, tt.began, tt.maxAge)); !slices.Equal(got, tt.want) {
				t.Errorf("maxAgeVictims() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMaxAgeReason(t *testing.T) {
	now := t0.Add(5 * time.Hour)
	if got, want := maxAgeReason(imageRecord{lastUsed: now.Add(-3 * time.Hour)}, now, t0, 2*time.Hour), "unused for 3h, over imageMaximumGCAge 2h"; got != want {
		t.Errorf("maxAgeReason() = %q, want %q", got, want)
	}
	if got, want := maxAgeReason(imageRecord{firstDetected: now.Add(-150 * time.Minute)}, now, t0, 2*time.Hour), "unused for 2h30m, over imageMaximumGCAge 2h"; got != want {
		t.Errorf("maxAgeReason() = %q, want %q", got, want)
	}
	if got, want := maxAgeReason(imageRecord{}, now, t0, 2*time.Hour), "unused since berth started 5h ago, over imageMaximumGCAge 2h"; got != want {
		t.Errorf("maxAgeReason() = %q, want %q", got, want)
	}
}

func TestVerdict(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	p := Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: 2 * time.Hour}
	began := t0
	tests := []struct {
		name  string
		img   imageRecord
		p     Policy
		began time.Time
		want  string
	}{
		{"in use", imageRecord{inUse: true, lastUsed: now}, p, began, "in use by a container or pod"},
		{"in use and pinned", imageRecord{inUse: true, lastUsed: now, pin: pinnedSandbox}, p, began, "in use by a container or pod"},
		{"sandbox", imageRecord{pin: pinnedSandbox}, p, began, "pinned (sandbox image)"},
		{"configured", imageRecord{pin: pinnedConfigured}, p, began, "pinned (configured)"},
		{"runtime", imageRecord{pin: pinnedByRuntime}, p, began, "pinned (by the runtime)"},
		{"used at now", imageRecord{firstDetected: t0, lastUsed: now}, p, began, "in use moments ago"},
		{"young", imageRecord{firstDetected: now.Add(-50 * time.Second)}, p, began, "younger than imageMinimumGCAge (1m10s left)"},
		{"over maximum age", imageRecord{firstDetected: t0, lastUsed: now.Add(-3 * time.Hour)}, p, began,
			"older than imageMaximumGCAge (unused for 3h): removed at the next GC"},
		{"over maximum age, unknown past", imageRecord{}, p, began,
			"older than imageMaximumGCAge (unused since berth started): removed at the next GC"},
		{"maximum age not reached", imageRecord{firstDetected: t0, lastUsed: now.Add(-time.Hour)}, p, began, "collectable: least recently used first"},
		{"berth too recent for the maximum age", imageRecord{}, p, now.Add(-time.Hour), "collectable: least recently used first"},
		{"no maximum age", imageRecord{}, DefaultPolicy(), began, "collectable: least recently used first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdict(tt.img, now, tt.began, tt.p); got != tt.want {
				t.Errorf("verdict() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormatting(t *testing.T) {
	durations := map[time.Duration]string{
		0: "0s", 30 * time.Second: "30s", 70 * time.Second: "1m10s", time.Minute: "1m", 3 * time.Hour: "3h",
		150 * time.Minute: "2h30m", time.Hour + 5*time.Second: "1h0m5s", 1500 * time.Millisecond: "2s",
	}
	for d, want := range durations {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
	sizes := map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 4_300_000: "4.3 MB", 1_500_000_000: "1.5 GB"}
	for n, want := range sizes {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	images := []struct {
		r    imageRecord
		want string
	}{
		{imageRecord{id: id('a'), size: 4_300_000, tags: []string{"docker.io/library/busybox:1.35", "berth.local/busybox:1.35"}},
			"busybox:1.35, berth.local/busybox:1.35 (sha256:aaaaaaaaaaaa, 4.3 MB)"},
		{imageRecord{id: id('b'), size: 10, digests: []string{"docker.io/library/app@" + id('c')}},
			"app@" + id('c') + " (sha256:bbbbbbbbbbbb, 10 B)"},
		{imageRecord{id: id('b'), size: 10}, "sha256:bbbbbbbbbbbb (10 B)"},
	}
	for _, tt := range images {
		if got := describeImage(tt.r); got != tt.want {
			t.Errorf("describeImage() = %q, want %q", got, tt.want)
		}
	}
}
