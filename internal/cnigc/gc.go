package cnigc

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/runtime"
)

// The reasons of the node events the collector records.
const (
	ReasonCollected        = "PodNetworkStateCollected"
	ReasonCollectionFailed = "PodNetworkStateCollectionFailed"
)

const (
	// DefaultPeriod is how often the collector looks for orphans.
	DefaultPeriod = time.Minute
	// DefaultGrace outlasts a RunPodSandbox berth may still have in flight
	// (its CRI call timeout) by a margin for the runtime's own clean-up.
	DefaultGrace = runtime.DefaultCallTimeout + time.Minute
	// passTimeout bounds one pass's reads and removals.
	passTimeout = time.Minute
	// quietRetry is how soon a pass after the runtime came back is tried
	// again when the runtime did not answer yet.
	quietRetry = 2 * time.Second
)

// Options are a Collector's network, edges and timing.
type Options struct {
	Network Network
	Tables  Tables
	Leases  Leases
	// Results is libcni's result cache of the network; nil leaves it alone.
	Results Results
	// RemoveNetNS removes a network namespace the results name
	// (RemoveNetNS of this package if nil).
	RemoveNetNS func(path string) error
	// Sandboxes returns the IDs of every sandbox the runtime knows, in any
	// state.
	Sandboxes func(ctx context.Context) (map[string]bool, error)
	Clock     clock.WithTicker
	// Record records a node event (v1.EventTypeNormal or Warning).
	Record func(eventType, reason, message string)
	Log    *slog.Logger
	Period time.Duration // DefaultPeriod if zero
	Grace  time.Duration // DefaultGrace if zero
}

// Collector removes the CNI state of berth's network that no sandbox owns.
// Collect runs one pass; Run runs them periodically and when the runtime
// came back after RuntimeExited and RuntimeRestarted. The suspects belong
// to whichever of Collect and Run runs: Collect must return before Run
// starts.
type Collector struct {
	o        Options
	suspects map[string]time.Time

	mu sync.Mutex
	// network is o.Network as SetNetwork last changed it.
	network Network
	down    map[string]bool // held while the runtime was down
	ready   map[string]bool // the same, once the runtime is back
	poke    chan struct{}
}

// New returns a collector; nothing runs until Collect or Run.
func New(o Options) *Collector {
	if o.Period <= 0 {
		o.Period = DefaultPeriod
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Record == nil {
		o.Record = func(string, string, string) {}
	}
	if o.RemoveNetNS == nil {
		o.RemoveNetNS = RemoveNetNS
	}
	return &Collector{o: o, network: o.Network, suspects: map[string]time.Time{}, poke: make(chan struct{}, 1)}
}

// SetNetwork changes the pod CIDRs the collector's network is on (the
// Node's podCIDR came or changed); passes after it use them.
func (c *Collector) SetNetwork(n Network) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.network = n
}

// Collect runs one pass. quiet says that no sandbox can be in creation
// (berth has not asked the runtime for one since it started), so what the
// runtime does not know is an orphan at once.
func (c *Collector) Collect(ctx context.Context, quiet bool) {
	c.pass(ctx, quiet, nil)
}

// Run collects every period, and at once after the runtime came back, until
// ctx ends.
func (c *Collector) Run(ctx context.Context) {
	t := c.o.Clock.NewTicker(c.o.Period)
	defer t.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.pass(ctx, false, nil)
			continue
		case <-c.poke:
		case <-retry:
		}
		retry = nil
		c.mu.Lock()
		quiet := c.ready
		c.ready = nil
		c.mu.Unlock()
		if !c.pass(ctx, false, quiet) && len(quiet) > 0 {
			// The CRI client may still be reconnecting to the containerd
			// that came back. What was held while it was down stays an
			// orphan if unknown, however late it is looked at: sandbox IDs
			// are never reused.
			c.mu.Lock()
			c.ready = mergeInto(c.ready, quiet)
			c.mu.Unlock()
			retry = c.o.Clock.After(quietRetry)
		}
	}
}

func mergeInto(dst, src map[string]bool) map[string]bool {
	if dst == nil {
		dst = map[string]bool{}
	}
	maps.Copy(dst, src)
	return dst
}

// RuntimeExited reads what the CNI state holds while the runtime is down:
// no sandbox can be in creation then, and the creations the dead runtime
// had in flight died with it. It must be called before the runtime is
// started again (the supervisor's exit event comes before its restart).
func (c *Collector) RuntimeExited() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := c.read(ctx)
	if err != nil {
		c.o.Log.Warn("reading the pod network state while the runtime is down failed", "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = map[string]bool{}
	for id := range held {
		c.down[id] = true
	}
}

// RuntimeRestarted has Run collect what RuntimeExited read and the runtime
// that came back does not know.
func (c *Collector) RuntimeRestarted() {
	c.mu.Lock()
	if c.down != nil {
		c.ready = mergeInto(c.ready, c.down)
		c.down = nil
	}
	c.mu.Unlock()
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// read returns what the nat table, the leases and the result cache hold,
// by container ID. An unreadable lease or cache file is logged and left
// alone.
func (c *Collector) read(ctx context.Context) (map[string]*Held, error) {
	save, err := c.o.Tables.SaveNAT(ctx)
	if err != nil {
		return nil, err
	}
	nat, err := ParseNAT(save)
	if err != nil {
		return nil, err
	}
	leases, err := c.o.Leases.List()
	if err != nil {
		c.o.Log.Warn("some host-local leases could not be read; left alone", "err", err)
	}
	c.mu.Lock()
	network := c.network
	c.mu.Unlock()
	held := Holdings(nat, leases, network)
	if c.o.Results != nil {
		owned, err := c.o.Results.Owned()
		if err != nil {
			c.o.Log.Warn("some CNI result cache entries could not be read; left alone", "err", err)
		}
		for _, id := range owned {
			if held[id] == nil {
				held[id] = &Held{ID: id}
			}
		}
	}
	return held, nil
}

// locate adds h's cached results and network namespaces, which only a
// removal needs: looking them up globs the cache dir, and a pass over a
// node of many pods collects few or none. The loopback's entry names no
// IPAM dir: it goes with an ID that is this node's by its other state.
func (c *Collector) locate(h *Held) {
	if c.o.Results != nil {
		h.Cache = c.o.Results.Files(h.ID)
		h.NetNS = c.o.Results.NetNS(h.ID)
	}
}

// pass reads the CNI state, then the runtime's sandboxes, and removes what
// Decide picks. Nothing is removed when either read fails (false).
func (c *Collector) pass(ctx context.Context, quietAll bool, quiet map[string]bool) bool {
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	held, err := c.read(ctx)
	if err != nil {
		c.o.Log.Warn("reading the pod network state failed", "err", err)
		return false
	}
	known, err := c.o.Sandboxes(ctx)
	if err != nil {
		c.o.Log.Warn("listing the runtime's sandboxes for the pod network GC failed", "err", err)
		return false
	}
	ids := slices.Sorted(maps.Keys(held))
	if quietAll {
		quiet = map[string]bool{}
		for _, id := range ids {
			quiet[id] = true
		}
	}
	now := c.o.Clock.Now()
	collect, next := Decide(Pass{Held: ids, Known: known, Quiet: quiet, Now: now}, c.suspects, c.o.Grace)
	c.suspects = next
	for _, id := range collect {
		c.locate(held[id])
		if err := c.remove(ctx, held[id]); err != nil {
			// Tried again at the next pass.
			c.suspects[id] = now.Add(-c.o.Grace)
			c.o.Log.Warn("removing an orphaned sandbox's pod network state failed", "sandbox", id, "err", err)
			c.o.Record(v1.EventTypeWarning, ReasonCollectionFailed,
				fmt.Sprintf("removing the pod network state of sandbox %s failed: %v", short(id), err))
			continue
		}
		what := describe(held[id])
		c.o.Log.Info("removed an orphaned sandbox's pod network state", "sandbox", id, "removed", what)
		c.o.Record(v1.EventTypeNormal, ReasonCollected,
			fmt.Sprintf("removed the pod network state of sandbox %s, which the runtime does not know: %s", short(id), what))
	}
	return true
}

// remove deletes h's nat rules and chains, then its leases: an address is
// leased again only once nothing of the old sandbox points at it. Then its
// network namespace, with the pod's veth in it. The cached results go
// last: they record what the rest was.
func (c *Collector) remove(ctx context.Context, h *Held) error {
	if len(h.Rules) > 0 || len(h.Chains) > 0 {
		if err := c.o.Tables.Restore(ctx, Script(h)); err != nil {
			return err
		}
	}
	for _, ip := range h.Leases {
		if err := c.o.Leases.Release(ctx, Lease{IP: ip, ID: h.ID}); err != nil {
			return err
		}
	}
	for _, ns := range h.NetNS {
		if err := c.o.RemoveNetNS(ns); err != nil {
			return err
		}
	}
	if len(h.Cache) > 0 {
		return c.o.Results.Remove(h.Cache)
	}
	return nil
}

// describe says what h held, for a log line and an event.
func describe(h *Held) string {
	var parts []string
	if len(h.Rules) > 0 {
		parts = append(parts, fmt.Sprintf("%d nat rules", len(h.Rules)))
	}
	if len(h.Chains) > 0 {
		parts = append(parts, "nat chains "+strings.Join(h.Chains, ", "))
	}
	if len(h.Leases) > 0 {
		parts = append(parts, "address lease "+strings.Join(h.Leases, ", "))
	}
	if len(h.NetNS) > 0 {
		parts = append(parts, "network namespace "+strings.Join(h.NetNS, ", "))
	}
	if len(h.Cache) > 0 {
		parts = append(parts, fmt.Sprintf("%d CNI result cache files", len(h.Cache)))
	}
	return strings.Join(parts, "; ")
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
