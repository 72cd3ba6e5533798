package prober

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// scheduler keeps every worker's next attempt in one timer heap and hands
// due workers to fire. One timer serves thousands of probes: no goroutine
// or ticker per probe sleeps in the meantime.
type scheduler struct {
	clk  clock.Clock
	wake chan struct{} // a new earliest entry: recompute the timer

	mu sync.Mutex
	q  dueQueue
}

func newScheduler(clk clock.Clock) *scheduler {
	return &scheduler{clk: clk, wake: make(chan struct{}, 1)}
}

// schedule queues w at at, or moves it there if already queued.
func (s *scheduler) schedule(w *worker, at time.Time) {
	s.mu.Lock()
	w.due = at
	if w.index >= 0 {
		heap.Fix(&s.q, w.index)
	} else {
		heap.Push(&s.q, w)
	}
	first := s.q[0] == w
	s.mu.Unlock()
	if first {
		s.signal()
	}
}

// advance moves a queued w earlier to at; a worker in flight or already due
// sooner is left alone.
func (s *scheduler) advance(w *worker, at time.Time) {
	s.mu.Lock()
	if w.index < 0 || !at.Before(w.due) {
		s.mu.Unlock()
		return
	}
	w.due = at
	heap.Fix(&s.q, w.index)
	first := s.q[0] == w
	s.mu.Unlock()
	if first {
		s.signal()
	}
}

// remove unqueues w if it is queued.
func (s *scheduler) remove(w *worker) {
	s.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&s.q, w.index)
	}
	s.mu.Unlock()
}

func (s *scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *scheduler) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q)
}

// popDue unqueues the earliest worker if it is due at now, and returns it
// with the time it was due.
func (s *scheduler) popDue(now time.Time) (*worker, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 || s.q[0].due.After(now) {
		return nil, time.Time{}, false
	}
	w := heap.Pop(&s.q).(*worker)
	return w, w.due, true
}

// untilNext is how long until the earliest entry is due; false when the
// queue is empty.
func (s *scheduler) untilNext(now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return 0, false
	}
	return s.q[0].due.Sub(now), true
}

// run fires every worker when it is due, with the time it was due, until
// ctx is done. fire must not block.
func (s *scheduler) run(ctx context.Context, fire func(w *worker, due time.Time)) {
	var timer clock.Timer // made on first use: no timer while nothing is queued
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := s.clk.Now()
		fired := false
		for {
			w, due, ok := s.popDue(now)
			if !ok {
				break
			}
			fire(w, due)
			fired = true
		}
		if fired {
			continue // firing took time: look at the clock again
		}
		var tick <-chan time.Time
		if wait, ok := s.untilNext(now); ok {
			if timer == nil {
				timer = s.clk.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tick = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			if tick != nil {
				timer.Stop()
			}
		case <-tick:
		}
	}
}

// dueQueue is a min-heap of workers by due time; each worker knows its
// index so it can be moved or removed in O(log n).
type dueQueue []*worker

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *dueQueue) Push(x any) {
	w := x.(*worker)
	w.index = len(*q)
	*q = append(*q, w)
}

func (q *dueQueue) Pop() any {
	old := *q
	n := len(old) - 1
	w := old[n]
	old[n] = nil
	w.index = -1
	*q = old[:n]
	return w
}
