package stats

import (
	"math/bits"
	"sync"
	"time"
)

// cpuSample is one reading of a cumulative CPU counter.
type cpuSample struct {
	at    time.Time
	usage uint64 // core-nanoseconds since the counter began
}

// nanoCores is the CPU rate between the previous reading of a counter
// (nil: none) and the current one, in billionths of a core, as the
// kubelet's UsageNanoCores means it: usage over the last sampling
// interval. It also returns the reading to compare the next one with.
//
// There is no rate for a first reading. Nor is there one for readings
// not apart in time: a reading no newer than the one held comes from a
// Get that raced another, and the newer one is kept. Nor for a counter
// that went back: its cgroup was removed and made again, and the
// difference means nothing; the new reading starts the next interval.
func nanoCores(prev *cpuSample, cur cpuSample) (*uint64, cpuSample) {
	if prev == nil {
		return nil, cur
	}
	elapsed := cur.at.Sub(prev.at)
	if elapsed <= 0 {
		return nil, *prev
	}
	if cur.usage < prev.usage {
		return nil, cur
	}
	// used·10⁹/elapsed in 128 bits: used·10⁹ overflows 64 bits once
	// used exceeds 18 core-seconds, which 2 cores pass in 9 s.
	hi, lo := bits.Mul64(cur.usage-prev.usage, uint64(time.Second))
	if hi >= uint64(elapsed) {
		// More than 2⁶⁴ nanocores: no machine has that many cores, so
		// one of the readings is wrong.
		return nil, cur
	}
	rate, _ := bits.Div64(hi, lo, uint64(elapsed))
	return &rate, cur
}

// cpuCounter names a CPU counter whose rate the provider follows.
type cpuCounter struct {
	scope cpuScope
	uid   string // the pod's, for scopePod
}

type cpuScope int

const (
	scopeNode cpuScope = iota
	scopePodsCgroup
	scopePod
)

func podCounter(uid string) cpuCounter { return cpuCounter{scope: scopePod, uid: uid} }

// cpuHistory holds the last reading of each counter, so that a Get can
// report the rate since the one before. Gets may run at once (the
// eviction manager's and the API's), hence the lock. The zero value is
// ready to use.
type cpuHistory struct {
	mu   sync.Mutex
	last map[cpuCounter]cpuSample
}

// observe records a reading of counter c and returns the rate since the
// previous one, nil when there is none (see nanoCores).
func (h *cpuHistory) observe(c cpuCounter, cur cpuSample) *uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var prev *cpuSample
	if s, ok := h.last[c]; ok {
		prev = &s
	}
	rate, keep := nanoCores(prev, cur)
	if h.last == nil {
		h.last = map[cpuCounter]cpuSample{}
	}
	h.last[c] = keep
	return rate
}

// retainPods forgets the readings of pods not in uids: pods come and go,
// and the history must not grow with every pod the node has ever run.
func (h *cpuHistory) retainPods(uids map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.last {
		if c.scope == scopePod && !uids[c.uid] {
			delete(h.last, c)
		}
	}
}
