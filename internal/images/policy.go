package images

import (
	"errors"
	"fmt"
	"time"
)

// The kubelet's defaults for the image GC policy.
const (
	DefaultHighThresholdPercent = 85
	DefaultLowThresholdPercent  = 80
	DefaultMinAge               = 2 * time.Minute
)

// Policy is when images are collected, with the meaning and the names of the
// KubeletConfiguration fields it comes from.
type Policy struct {
	// HighThresholdPercent is the image filesystem usage at or above which
	// the periodic GC frees space (imageGCHighThresholdPercent). 100 turns
	// the periodic GC off unless MaxAge is set; DeleteUnusedImages still
	// works.
	HighThresholdPercent int
	// LowThresholdPercent is the usage the GC frees down to
	// (imageGCLowThresholdPercent).
	LowThresholdPercent int
	// MinAge protects an image detected more recently than this, since it
	// may have just been pulled for a container about to start
	// (imageMinimumGCAge).
	MinAge time.Duration
	// MaxAge removes an image unused for longer than this at the next GC,
	// whatever the disk usage (imageMaximumGCAge); 0 turns it off.
	MaxAge time.Duration
}

// DefaultPolicy returns the kubelet's default policy.
func DefaultPolicy() Policy {
	return Policy{
		HighThresholdPercent: DefaultHighThresholdPercent,
		LowThresholdPercent:  DefaultLowThresholdPercent,
		MinAge:               DefaultMinAge,
	}
}

// Validate reports every problem of the policy at once, each naming its
// KubeletConfiguration field. The rules are the kubelet's: its image GC
// manager's for the thresholds (low may equal high, so 100/100 turns the
// GC off), its configuration validation's for the ages.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field string, value any, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %v: %s", field, value, fmt.Sprintf(format, args...)))
	}
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		bad("imageGCHighThresholdPercent", p.HighThresholdPercent, "must be between 0 and 100, inclusive")
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		bad("imageGCLowThresholdPercent", p.LowThresholdPercent, "must be between 0 and 100, inclusive")
	}
	if p.LowThresholdPercent > p.HighThresholdPercent {
		bad("imageGCLowThresholdPercent", p.LowThresholdPercent, "must not be greater than imageGCHighThresholdPercent %d", p.HighThresholdPercent)
	}
	if p.MinAge < 0 {
		bad("imageMinimumGCAge", p.MinAge, "must not be negative")
	}
	if p.MaxAge < 0 {
		bad("imageMaximumGCAge", p.MaxAge, "must not be negative")
	}
	if p.MaxAge > 0 && p.MaxAge <= p.MinAge {
		bad("imageMaximumGCAge", p.MaxAge, "must be greater than imageMinimumGCAge %s", p.MinAge)
	}
	return errors.Join(errs...)
}

// periodic reports whether the periodic GC runs at all. As in the kubelet,
// a high threshold of 100 turns it off only when no maximum age asks for it.
func (p Policy) periodic() bool {
	return p.HighThresholdPercent < 100 || p.MaxAge > 0
}
