package images

import (
	"fmt"
	"strings"
	"time"
)

// shortDuration writes d to the second without trailing zero units: "3h",
// "2h30m", "1m10s", "0s".
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// HumanBytes writes n in decimal units, as image tools do: "512 B", "4.3 MB".
func HumanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	for v >= unit && i < 6 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %cB", v, " kMGTPE"[i])
}

// ShortID is an image ID cut to the 12 hex digits people recognize.
func ShortID(id string) string {
	algo, hex, ok := strings.Cut(id, ":")
	if ok && len(hex) > 12 {
		return algo + ":" + hex[:12]
	}
	return id
}

// describeImage names an image for an event: its tags as people write them
// (or a digest when it has no tag), its short ID and its size.
func describeImage(r imageRecord) string {
	var names []string
	for _, t := range r.tags {
		names = append(names, familiar(t))
	}
	if len(names) == 0 && len(r.digests) > 0 {
		names = append(names, familiar(r.digests[0]))
	}
	if len(names) == 0 {
		return fmt.Sprintf("%s (%s)", ShortID(r.id), HumanBytes(r.size))
	}
	return fmt.Sprintf("%s (%s, %s)", strings.Join(names, ", "), ShortID(r.id), HumanBytes(r.size))
}
