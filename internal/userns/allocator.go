package userns

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// Mapping is a pod's user namespace: container IDs 0..Length-1 are host IDs
// HostID..HostID+Length-1, the same for users and groups (the kubelet maps
// uids and gids alike).
type Mapping struct {
	HostID uint32
	Length uint32
}

// Allocator hands out slots of perPod IDs from the kubelet's range: slot i
// is host IDs (first/perPod+i)*perPod onwards. It is a plain state machine
// with no I/O and no lock; its owner serialises calls.
type Allocator struct {
	off, slots int // the range in slots: first/perPod, length/perPod
	perPod     uint32
	bySlot     map[int]types.UID
	byPod      map[types.UID]int
}

// NewAllocator checks the kubelet's range as MakeUserNsManager does: perPod
// a multiple of 65536, the range aligned to it, never starting at host ID 0
// (a pod's root must not be the node's), and room for maxPods pods.
func NewAllocator(first, length, perPod uint32, maxPods int) (*Allocator, error) {
	switch {
	case perPod == 0 || perPod%unit != 0:
		return nil, fmt.Errorf("user namespace IDs per pod %d is not a multiple of %d", perPod, unit)
	case first%perPod != 0:
		return nil, fmt.Errorf("the node's first subordinate ID %d is not a multiple of %d", first, perPod)
	case first < perPod:
		return nil, fmt.Errorf("the node's first subordinate ID %d must be at least %d: host ID 0 is never mapped", first, perPod)
	case length%perPod != 0:
		return nil, fmt.Errorf("the node's subordinate ID count %d is not a multiple of %d", length, perPod)
	case int64(length/perPod) < int64(maxPods):
		return nil, fmt.Errorf("the node's %d subordinate IDs are not enough for %d pods of %d IDs", length, maxPods, perPod)
	}
	return &Allocator{off: int(first / perPod), slots: int(length / perPod), perPod: perPod,
		bySlot: map[int]types.UID{}, byPod: map[types.UID]int{}}, nil
}

// unit is the smallest user namespace the kubelet gives a pod.
const unit = 65536

// Allocate gives pod a free range, or the one it holds.
func (a *Allocator) Allocate(pod types.UID) (Mapping, error) {
	if s, ok := a.byPod[pod]; ok {
		return a.mapping(s), nil
	}
	// The lowest free slot, as the kubelet's AllocateNext of its bitmap.
	for s := 0; s < a.slots; s++ {
		if _, used := a.bySlot[s]; !used {
			a.bySlot[s], a.byPod[pod] = pod, s
			return a.mapping(s), nil
		}
	}
	return Mapping{}, fmt.Errorf("no free user namespace range: all %d are in use", a.slots)
}

// Record claims m for pod, as found in its mappings file at a restart or
// before a container starts. It fails when m is not a range of this
// allocator, when another pod holds it, or when pod holds another one.
func (a *Allocator) Record(pod types.UID, m Mapping) error {
	if m.Length != a.perPod {
		return fmt.Errorf("range of %d IDs, want %d", m.Length, a.perPod)
	}
	if m.HostID%a.perPod != 0 {
		return fmt.Errorf("first host ID %d is not a multiple of %d", m.HostID, a.perPod)
	}
	s := int(m.HostID/a.perPod) - a.off
	if s < 0 || s >= a.slots {
		return fmt.Errorf("host IDs %d-%d are outside the node's range", m.HostID, uint64(m.HostID)+uint64(m.Length)-1)
	}
	if prev, ok := a.byPod[pod]; ok {
		if prev != s {
			return fmt.Errorf("the pod already holds host IDs from %d", a.mapping(prev).HostID)
		}
		return nil
	}
	if other, used := a.bySlot[s]; used {
		return fmt.Errorf("host IDs from %d are held by pod %s", m.HostID, other)
	}
	a.bySlot[s], a.byPod[pod] = pod, s
	return nil
}

// Release frees pod's range; it reports whether pod held one.
func (a *Allocator) Release(pod types.UID) bool {
	s, ok := a.byPod[pod]
	if ok {
		delete(a.byPod, pod)
		delete(a.bySlot, s)
	}
	return ok
}

// Get returns pod's range, if it holds one.
func (a *Allocator) Get(pod types.UID) (Mapping, bool) {
	s, ok := a.byPod[pod]
	if !ok {
		return Mapping{}, false
	}
	return a.mapping(s), true
}

// Pods are the pods that hold a range.
func (a *Allocator) Pods() []types.UID {
	out := make([]types.UID, 0, len(a.byPod))
	for p := range a.byPod {
		out = append(out, p)
	}
	return out
}

func (a *Allocator) mapping(slot int) Mapping {
	return Mapping{HostID: uint32(a.off+slot) * a.perPod, Length: a.perPod}
}
