package prober

import (
	"context"
	"sync"
)

// updateQueue delivers result changes to the sync loop without ever making
// a probe wait for it. Pending changes of the same result coalesce into the
// latest one: the reader wants to know what to look at again, and reads the
// current value anyway. Nothing is dropped, whatever the reader's pace.
type updateQueue struct {
	out    chan Update
	signal chan struct{}

	mu      sync.Mutex
	order   []updateKey // first-pending first
	pending map[updateKey]Update
}

type updateKey struct {
	probeType   ProbeType
	containerID string
}

// updatesBuffer lets bursts pass without the pump waiting on the reader.
const updatesBuffer = 256

func newUpdateQueue() *updateQueue {
	return &updateQueue{
		out:     make(chan Update, updatesBuffer),
		signal:  make(chan struct{}, 1),
		pending: map[updateKey]Update{},
	}
}

func (q *updateQueue) push(u Update) {
	k := updateKey{u.Type, u.ContainerID}
	q.mu.Lock()
	if _, ok := q.pending[k]; !ok {
		q.order = append(q.order, k)
	}
	q.pending[k] = u
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *updateQueue) pop() (Update, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return Update{}, false
	}
	k := q.order[0]
	q.order[0] = updateKey{}
	q.order = q.order[1:]
	u := q.pending[k]
	delete(q.pending, k)
	return u, true
}

// pump moves pending updates to out until ctx is done.
func (q *updateQueue) pump(ctx context.Context) {
	for {
		u, ok := q.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-q.signal:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case q.out <- u:
		}
	}
}
