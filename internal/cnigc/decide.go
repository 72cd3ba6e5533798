package cnigc

import (
	"slices"
	"time"
)

// Pass is what one collection pass observed: the container IDs the CNI
// state holds (read first), then the sandbox IDs the runtime knows in any
// state (listed after, so a sandbox that finished starting in between
// counts as known).
type Pass struct {
	Held  []string
	Known map[string]bool
	// Quiet are IDs held at a moment when no sandbox could be in creation:
	// read while the runtime was down, or before berth made its first CRI
	// call to a runtime it started itself. Unknown now, they are orphans
	// at once.
	Quiet map[string]bool
	Now   time.Time
}

// Decide returns the IDs to collect and the suspects to carry to the next
// pass: for each ID held but unknown, the time it was first seen so.
//
// containerd 1.6 adds a sandbox to its store only after CNI ADD returned,
// so a sandbox in creation holds CNI state the runtime does not know yet.
// Such a creation ends, one way or the other, within berth's CRI call
// timeout (runtime.DefaultCallTimeout); an ID unknown in every pass over a
// longer grace is therefore no creation in flight but an orphan. An ID that
// is known in any pass, or no longer held, starts over.
func Decide(p Pass, suspects map[string]time.Time, grace time.Duration) (collect []string, next map[string]time.Time) {
	next = map[string]time.Time{}
	for _, id := range p.Held {
		if p.Known[id] {
			continue
		}
		first, seen := suspects[id]
		switch {
		case p.Quiet[id]:
			collect = append(collect, id)
		case seen && p.Now.Sub(first) >= grace:
			collect = append(collect, id)
		case seen:
			next[id] = first
		default:
			next[id] = p.Now
		}
	}
	slices.Sort(collect)
	return collect, next
}
