package devicemanager

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
)

// choice is the first half of choosing a container's devices of one
// resource: what it reuses from its pod's init containers, and what is left
// to take from the free devices.
type choice struct {
	reused    []string
	remaining int
	available sets.Set[string]
}

// chooseFrom starts the choice of needed devices: devices released by the
// pod's init containers first (as the kubelet does, whatever their health:
// the pod already holds them), then the available ones, healthy and held by
// no active pod. It fails when those cannot cover the need.
func chooseFrom(resource string, needed int, reusable, available sets.Set[string]) (choice, error) {
	c := choice{remaining: needed, available: available.Clone()}
	for _, id := range sets.List(reusable) {
		if c.remaining == 0 {
			break
		}
		c.reused = append(c.reused, id)
		c.available.Delete(id)
		c.remaining--
	}
	if c.available.Len() < c.remaining {
		return choice{}, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d",
			resource, c.remaining, c.available.Len())
	}
	return c, nil
}

// needsPreference tells whether the plugin's GetPreferredAllocation can
// change the outcome: only when there is more to choose from than needed.
func (c choice) needsPreference() bool {
	return c.remaining > 0 && c.available.Len() > c.remaining
}

// finish completes the choice: the plugin's preferred devices first, in its
// order, as far as they are available, then the available ones in ID order.
func (c choice) finish(preferred []string) []string {
	out := slices.Clone(c.reused)
	taken := sets.New(out...)
	take := func(id string) {
		if c.remaining > 0 && c.available.Has(id) && !taken.Has(id) {
			out = append(out, id)
			taken.Insert(id)
			c.remaining--
		}
	}
	for _, id := range preferred {
		take(id)
	}
	for _, id := range sets.List(c.available) {
		take(id)
	}
	return out
}
