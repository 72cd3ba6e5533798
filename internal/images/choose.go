package images

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// compareForEviction orders images as the seed's byLastUsedAndDetected:
// least recently used first, ties broken by first detection; the ID settles
// the rest so that the order does not depend on map iteration. Each key is
// compared only when the ones before it tie (cmp.Or would compare all
// three every time): the ID, long and with a prefix common to all, costs
// the most. The times are not turned into integers beforehand: those of the
// real clock carry monotonic readings, which Compare goes by when both sides
// have one, and the zero time has no UnixNano.
func compareForEviction(a, b *imageRecord) int {
	if c := a.lastUsed.Compare(b.lastUsed); c != 0 {
		return c
	}
	if c := a.firstDetected.Compare(b.firstDetected); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// inEvictionOrder returns copies of the images keep accepts, in eviction
// order. It sorts pointers, not the records themselves: a record is many
// times the size of a pointer, and the sort would move it at every swap.
// Each record is copied once, after the sort.
func inEvictionOrder(images []imageRecord, keep func(*imageRecord) bool) []imageRecord {
	order := make([]*imageRecord, 0, len(images))
	for i := range images {
		if keep(&images[i]) {
			order = append(order, &images[i])
		}
	}
	if len(order) == 0 {
		return nil
	}
	slices.SortFunc(order, compareForEviction)
	out := make([]imageRecord, len(order))
	for i, r := range order {
		out[i] = *r
	}
	return out
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

// collectable reports whether protection would return "", without
// formatting a reason nobody reads: the seed's freeSpace tests.
func collectable(img *imageRecord, now time.Time, minAge time.Duration) bool {
	return !img.inUse && img.pin == "" && img.lastUsed.Before(now) && now.Sub(img.firstDetected) >= minAge
}

// chooseImagesToFree returns the images the GC may remove at now to free
// space, in the order it removes them: the seed's freeSpace candidates
// (unused, unpinned, not used at or after now, at least minAge old), least
// recently used first. The caller removes them in order and stops once the
// removals that succeeded add up to what it must free; only it knows which
// succeed.
func chooseImagesToFree(images []imageRecord, now time.Time, minAge time.Duration) []imageRecord {
	return inEvictionOrder(images, func(img *imageRecord) bool {
		return collectable(img, now, minAge)
	})
}

// unusedFor returns how long img has gone unused at now, counted from its
// last use or, never used, from its first detection; known is false when
// that is the zero time (present before the first detection, never used).
func unusedFor(img *imageRecord, now time.Time) (d time.Duration, known bool) {
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
// now.
func overMaxAge(img *imageRecord, now, began time.Time, maxAge time.Duration) bool {
	return maxAgeInForce(now, began, maxAge) && unusedOver(img, now, maxAge)
}

// maxAgeInForce reports whether a maximum age removes anything at now. Like
// the kubelet, nothing goes until berth has itself run for maxAge (since
// began): an image present before then was last used at an unknown time.
func maxAgeInForce(now, began time.Time, maxAge time.Duration) bool {
	return maxAge > 0 && now.Sub(began) > maxAge
}

// unusedOver is overMaxAge once the maximum age is in force.
func unusedOver(img *imageRecord, now time.Time, maxAge time.Duration) bool {
	d, known := unusedFor(img, now)
	return !known || d > maxAge
}

// maxAgeVictims returns the images the GC removes at now whatever the disk
// usage, in eviction order: unused, unpinned, and unused for longer than
// maxAge. (Such an image is older than imageMinimumGCAge too, since a valid
// policy has maxAge > minAge.)
func maxAgeVictims(images []imageRecord, now, began time.Time, maxAge time.Duration) []imageRecord {
	// Tested once here rather than for every image in overMaxAge.
	if !maxAgeInForce(now, began, maxAge) {
		return nil
	}
	return inEvictionOrder(images, func(img *imageRecord) bool {
		return !img.inUse && img.pin == "" && unusedOver(img, now, maxAge)
	})
}

// maxAgeReason says why a max-age victim goes, for its event.
func maxAgeReason(img imageRecord, now, began time.Time, maxAge time.Duration) string {
	if d, known := unusedFor(&img, now); known {
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
	if overMaxAge(&img, now, began, p.MaxAge) {
		if d, known := unusedFor(&img, now); known {
			return fmt.Sprintf("older than imageMaximumGCAge (unused for %s): removed at the next GC", shortDuration(d))
		}
		return "older than imageMaximumGCAge (unused since berth started): removed at the next GC"
	}
	return "collectable: least recently used first"
}
