package containergc

import (
	"fmt"
	"time"
)

// The kubelet's defaults for its container GC flags.
const (
	DefaultMinAge             time.Duration = 0
	DefaultMaxPerPodContainer               = 1
	DefaultMaxContainers                    = -1
)

// Policy is how many dead containers are kept, with the meaning of the
// kubelet flags it comes from (they have no KubeletConfiguration field).
type Policy struct {
	// MinAge keeps a dead container created less than this long ago
	// (--minimum-container-ttl-duration).
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of one container of one
	// pod are kept (--maximum-dead-containers-per-container); negative means
	// no limit.
	MaxPerPodContainer int
	// MaxContainers is how many dead containers are kept on the node in all
	// (--maximum-dead-containers); negative means no limit.
	MaxContainers int
}

// DefaultPolicy returns the kubelet's default policy.
func DefaultPolicy() Policy {
	return Policy{
		MinAge:             DefaultMinAge,
		MaxPerPodContainer: DefaultMaxPerPodContainer,
		MaxContainers:      DefaultMaxContainers,
	}
}

// Validate applies the kubelet's only rule: the minimum age is not negative.
// Any count is valid, a negative one meaning no limit.
func (p Policy) Validate() error {
	if p.MinAge < 0 {
		return fmt.Errorf("--minimum-container-ttl-duration: %s: must not be negative", p.MinAge)
	}
	return nil
}
