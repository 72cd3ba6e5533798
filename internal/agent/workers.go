package agent

import (
	"context"
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/podworker"
)

// errWorkersStopped answers an eviction asked for once the pod workers
// have stopped.
var errWorkersStopped = errors.New("the pod workers have stopped")

// workerLink carries what the parts built before the pod workers ask of
// them: the device manager and the container GC whether a pod still has a
// worker, the eviction manager to evict a pod. The pod workers need the
// device manager and the eviction manager (which needs the garbage
// collectors) to be built, so those reach the workers through this link,
// built before all of them, and the workers' component answers while it
// runs. A question asked before it runs waits for it; one asked once it
// has stopped gets the safe answer: the pod has a worker (it keeps its
// devices and its containers), the eviction fails.
type workerLink struct {
	has     chan hasQuery
	evict   chan evictCall
	stopped chan struct{}
}

type hasQuery struct {
	uid   types.UID
	reply chan bool
}

type evictCall struct {
	ctx   context.Context
	uid   types.UID
	grace int64
	st    v1.PodStatus
	reply chan error
}

func newWorkerLink() *workerLink {
	return &workerLink{has: make(chan hasQuery), evict: make(chan evictCall), stopped: make(chan struct{})}
}

// Has reports whether the pod has a worker (it is running or being killed).
func (l *workerLink) Has(uid types.UID) bool {
	q := hasQuery{uid: uid, reply: make(chan bool, 1)}
	select {
	case l.has <- q:
		return <-q.reply
	case <-l.stopped:
		return true
	}
}

// Evict stops the pod for good with status st (podworker.Workers.Evict).
func (l *workerLink) Evict(ctx context.Context, uid types.UID, grace int64, st v1.PodStatus) error {
	c := evictCall{ctx: ctx, uid: uid, grace: grace, st: st, reply: make(chan error, 1)}
	select {
	case l.evict <- c:
		return <-c.reply
	case <-l.stopped:
		return errWorkersStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// podWorkers is the pod workers' component: the workers (one per pod,
// podworker.Workers) and the answers to the link. Built once everything
// its dependencies (podworker.Deps) name is; Run answers the link until
// ctx is done, then stops every worker and returns once they have (pods
// keep running). Stop does the same for a start-up that failed before Run.
type podWorkers struct {
	*podworker.Workers
	link *workerLink
}

func newPodWorkers(ctx context.Context, deps podworker.Deps, link *workerLink) *podWorkers {
	return &podWorkers{Workers: podworker.NewWorkers(ctx, deps), link: link}
}

func (w *podWorkers) Run(ctx context.Context) {
	defer w.Stop()
	var evicting sync.WaitGroup
	defer evicting.Wait()
	defer close(w.link.stopped)
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-w.link.has:
			q.reply <- w.Has(q.uid)
		case c := <-w.link.evict:
			// An eviction takes as long as the pod's grace period: the
			// next questions must not wait for it.
			evicting.Go(func() { c.reply <- w.Workers.Evict(c.ctx, c.uid, c.grace, c.st) })
		}
	}
}
