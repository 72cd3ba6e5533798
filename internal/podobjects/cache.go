package podobjects

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// cache keeps objects read by namespace/name for ttl. Callers asking for an
// object being read wait for that read instead of starting their own, so a
// hundred pods starting at once cost one GET. A NotFound answer is kept
// like an object (the kubelet keeps it too). Any other error is not kept,
// so the next caller tries again; and when the object was read before, that
// older copy is served instead of the error, as the kubelet's watch-based
// manager serves its last state while the API server is away: a container
// restarting during an outage must not fail for want of a configMap that
// has not changed.
type cache[T any] struct {
	ttl   time.Duration
	clock clock.PassiveClock
	fetch func(ctx context.Context, namespace, name string) (T, error)

	mu     sync.Mutex
	items  map[string]*item[T]
	lastGC time.Time
}

type item[T any] struct {
	// done is closed once val, err and fetched are set.
	done    chan struct{}
	val     T
	err     error
	fetched time.Time
	// used is when a caller last asked for it, under the cache's lock.
	used time.Time
}

// forgetAfter is how long an object no caller asks for is kept: pods
// refresh their volumes every minute or so, so an object unasked for longer
// belongs to pods that are gone. Kept meanwhile, it is there to be served
// stale should the API server go away.
const forgetAfter = 5 * time.Minute

func newCache[T any](ttl time.Duration, clk clock.PassiveClock, fetch func(context.Context, string, string) (T, error)) *cache[T] {
	return &cache[T]{ttl: ttl, clock: clk, fetch: fetch, items: map[string]*item[T]{}}
}

func (c *cache[T]) get(ctx context.Context, namespace, name string) (T, error) {
	key := namespace + "/" + name
	c.mu.Lock()
	now := c.clock.Now()
	c.collectLocked(now)
	prev := c.items[key]
	if prev != nil {
		prev.used = now
	}
	if prev != nil && (!isClosed(prev.done) || now.Sub(prev.fetched) < c.ttl) {
		c.mu.Unlock()
		select {
		case <-prev.done:
			return prev.val, prev.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	it := &item[T]{done: make(chan struct{}), used: now}
	c.items[key] = it
	c.mu.Unlock()

	val, err := c.fetch(ctx, namespace, name)

	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(it.done)
	if err != nil && !apierrors.IsNotFound(err) {
		// While it was being read, it was the only entry for key: callers
		// waited for it, and collection leaves unfinished reads alone.
		if prev != nil && prev.err == nil {
			// Stale but known: serve it, and keep it (with its old
			// time) so that the next caller tries the API again.
			it.val, it.fetched = prev.val, prev.fetched
			c.items[key] = prev
			return prev.val, nil
		}
		it.err, it.fetched = err, c.clock.Now()
		delete(c.items, key)
		return val, err
	}
	it.val, it.err, it.fetched = val, err, c.clock.Now()
	return val, err
}

// collectLocked drops, at most once per ttl, the items nobody asked for in
// forgetAfter, so that objects no pod refers to any more do not stay
// forever.
func (c *cache[T]) collectLocked(now time.Time) {
	if now.Sub(c.lastGC) < c.ttl {
		return
	}
	c.lastGC = now
	for k, it := range c.items {
		if isClosed(it.done) && now.Sub(it.used) >= forgetAfter {
			delete(c.items, k)
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
