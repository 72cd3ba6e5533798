package prober

import (
	"sync"
	"sync/atomic"
	"time"
)

// pool runs probe attempts on reused goroutines, so a probe's deep HTTP or
// gRPC stack is grown once rather than on every attempt. It never makes an
// attempt wait for another: with no idle goroutine, submit starts one. The
// number of goroutines is bounded by the number of probes, because a worker
// has at most one attempt in flight; beyond maxIdle, finished goroutines
// exit instead of parking.
type pool struct {
	run     func(w *worker, due time.Time)
	maxIdle int32

	tasks chan task // unbuffered: a send succeeds only into an idle goroutine
	idle  atomic.Int32
	wg    sync.WaitGroup
}

type task struct {
	w   *worker
	due time.Time
}

func newPool(maxIdle int, run func(w *worker, due time.Time)) *pool {
	return &pool{run: run, maxIdle: int32(maxIdle), tasks: make(chan task)}
}

// submit starts an attempt without blocking.
func (p *pool) submit(w *worker, due time.Time) {
	t := task{w, due}
	select {
	case p.tasks <- t:
		return
	default:
	}
	p.wg.Add(1)
	go p.loop(t)
}

func (p *pool) loop(t task) {
	defer p.wg.Done()
	for {
		p.run(t.w, t.due)
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		var ok bool
		t, ok = <-p.tasks
		p.idle.Add(-1)
		if !ok {
			return
		}
	}
}

// stop ends the pool once nothing submits any more, and waits for the
// attempts in flight (which see their context done) to return.
func (p *pool) stop() {
	close(p.tasks)
	p.wg.Wait()
}
