package images

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// errInvalidCapacity is the seed's error for an image filesystem that
// reports no capacity.
var errInvalidCapacity = errors.New("invalid capacity 0 on image filesystem")

// fsUsage is the seed's arithmetic on the image filesystem.
type fsUsage struct {
	// percent is 100 - available*100/capacity, in integer arithmetic.
	percent int
	// bytesToFree is capacity*(100-low)/100 - available when percent is at
	// or above the high threshold, 0 otherwise. It can be negative when
	// integer rounding puts usage at the threshold while above the low
	// target: nothing needs freeing then.
	bytesToFree int64
	// over reports percent >= high.
	over bool
	// clamped reports that available exceeded capacity and was cut down to
	// it.
	clamped bool
}

// imageFsUsage computes how much the GC must free, exactly as the seed's
// GarbageCollect does.
func imageFsUsage(capacity, available uint64, p Policy) (fsUsage, error) {
	var u fsUsage
	if available > capacity {
		available, u.clamped = capacity, true
	}
	if capacity == 0 {
		return u, errInvalidCapacity
	}
	c, a := toInt64(capacity), toInt64(available)
	u.percent = 100 - int(a*100/c)
	if u.percent >= p.HighThresholdPercent {
		u.over = true
		u.bytesToFree = c*int64(100-p.LowThresholdPercent)/100 - a
	}
	return u, nil
}

func toInt64(v uint64) int64 { return int64(min(v, 1<<63-1)) }

// sortForEviction orders images as the seed's byLastUsedAndDetected: least
// recently used first, ties broken by first detection; the ID settles the
// rest so that the order does not depend on map iteration.
func sortForEviction(images []imageRecord) {
	slices.SortFunc(images, func(a, b imageRecord) int {
		return cmp.Or(a.lastUsed.Compare(b.lastUsed), a.firstDetected.Compare(b.firstDetected), cmp.Compare(a.id, b.id))
	})
}

// protection returns why the space-freeing GC must leave img alone at now,
// or "" when it may remove it: in use, pinned, used at or after now (the
// seed's test against the GC's time), or detected less than minAge ago.
func protection(img imageRecord, now time.Time, minAge time.Duration) string {
	switch {
	case img.inUse:
		return "in use by a container or pod"
	case img.pin != "":
		return fmt.Sprintf("pinned (%s)", img.pin)
	case !img.lastUsed.Before(now):
		return "in use moments ago"
	case now.Sub(img.firstDetected) < minAge:
		return fmt.Sprintf("younger than imageMinimumGCAge (%s left)", shortDuration(minAge-now.Sub(img.firstDetected)))
	}
	return ""
}

// chooseImagesToFree returns the images the GC may remove at now to free
// space, in the order it removes them: the seed's freeSpace candidates
// (unused, unpinned, not used at or after now, at least minAge old), least
// recently used first. The caller removes them in order and stops once the
// removals that succeeded add up to what it must free; only it knows which
// succeed.
func chooseImagesToFree(images []imageRecord, now time.Time, minAge time.Duration) []imageRecord {
	var out []imageRecord
	for _, img := range images {
		if protection(img, now, minAge) == "" {
			out = append(out, img)
		}
	}
	sortForEviction(out)
	return out
}

// unusedFor returns how long img has gone unused at now, counted from its
// last use or, never used, from its first detection; known is false when
// that is the zero time (present before the first detection, never used).
func unusedFor(img imageRecord, now time.Time) (d time.Duration, known bool) {
	since := img.lastUsed
	if since.IsZero() {
		since = img.firstDetected
	}
	if since.IsZero() {
		return 0, false
	}
	return now.Sub(since), true
}

// overMaxAge reports whether img has gone unused for longer than maxAge at
// now. Like the kubelet, nothing is over it until berth has itself run for
// maxAge (since began): an image present before then was last used at an
// unknown time.
func overMaxAge(img imageRecord, now, began time.Time, maxAge time.Duration) bool {
	if maxAge <= 0 || now.Sub(began) <= maxAge {
		return false
	}
	d, known := unusedFor(img, now)
	return !known || d > maxAge
}

// maxAgeVictims returns the images the GC removes at now whatever the disk
// usage, in eviction order: unused, unpinned, and unused for longer than
// maxAge. (Such an image is older than imageMinimumGCAge too, since a valid
// policy has maxAge > minAge.)
func maxAgeVictims(images []imageRecord, now, began time.Time, maxAge time.Duration) []imageRecord {
	var out []imageRecord
	for _, img := range images {
		if !img.inUse && img.pin == "" && overMaxAge(img, now, began, maxAge) {
			out = append(out, img)
		}
	}
	sortForEviction(out)
	return out
}

// maxAgeReason says why a max-age victim goes, for its event.
func maxAgeReason(img imageRecord, now, began time.Time, maxAge time.Duration) string {
	if d, known := unusedFor(img, now); known {
		return fmt.Sprintf("unused for %s, over imageMaximumGCAge %s", shortDuration(d), shortDuration(maxAge))
	}
	return fmt.Sprintf("unused since berth started %s ago, over imageMaximumGCAge %s", shortDuration(now.Sub(began)), shortDuration(maxAge))
}

// verdict says in a few words why img would or would not be collected at
// now under p.
func verdict(img imageRecord, now, began time.Time, p Policy) string {
	if why := protection(img, now, p.MinAge); why != "" {
		return why
	}
	if overMaxAge(img, now, began, p.MaxAge) {
		if d, known := unusedFor(img, now); known {
			return fmt.Sprintf("older than imageMaximumGCAge (unused for %s): removed at the next GC", shortDuration(d))
		}
		return "older than imageMaximumGCAge (unused since berth started): removed at the next GC"
	}
	return "collectable: least recently used first"
}
