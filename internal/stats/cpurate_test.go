package stats

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

func TestNanoCores(t *testing.T) {
	t0 := testNow
	at := func(d time.Duration, usage uint64) cpuSample { return cpuSample{at: t0.Add(d), usage: usage} }
	sec := uint64(time.Second)
	for _, tc := range []struct {
		name     string
		prev     *cpuSample
		cur      cpuSample
		want     *uint64
		wantKeep cpuSample
	}{
		{"first reading", nil, at(0, 5*sec), nil, at(0, 5*sec)},
		{"half a core", ptr(at(0, 5*sec)), at(10*time.Second, 10*sec), u64(sec / 2), at(10*time.Second, 10*sec)},
		{"idle", ptr(at(0, 5*sec)), at(10*time.Second, 5*sec), u64(0), at(10*time.Second, 5*sec)},
		{"sub-second interval", ptr(at(0, 0)), at(time.Millisecond, 3*uint64(time.Millisecond)), u64(3 * sec), at(time.Millisecond, 3*uint64(time.Millisecond))},
		// 640 core-seconds: used·10⁹ needs more than 64 bits.
		{"64 busy cores for 10 s", ptr(at(0, 1)), at(10*time.Second, 1+640*sec), u64(64 * sec), at(10*time.Second, 1+640*sec)},
		{"counter went back: the next interval starts here", ptr(at(0, 5*sec)), at(10*time.Second, sec), nil, at(10*time.Second, sec)},
		{"no time between: keep the first", ptr(at(0, 5*sec)), at(0, 6*sec), nil, at(0, 5*sec)},
		{"older than the one held (racing Gets): keep the newer", ptr(at(10*time.Second, 5*sec)), at(0, 4*sec), nil, at(10*time.Second, 5*sec)},
		{"beyond 2⁶⁴ nanocores: a reading is wrong", ptr(at(0, 0)), at(time.Nanosecond, math.MaxUint64), nil, at(time.Nanosecond, math.MaxUint64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, keep := nanoCores(tc.prev, tc.cur)
			eq(t, "rate", got, tc.want)
			if !keep.at.Equal(tc.wantKeep.at) || keep.usage != tc.wantKeep.usage {
				t.Errorf("kept %+v, want %+v", keep, tc.wantKeep)
			}
		})
	}
}

func TestCPUHistory(t *testing.T) {
	var h cpuHistory
	sec := uint64(time.Second)
	node, pods, web, idle := cpuCounter{scope: scopeNode}, cpuCounter{scope: scopePodsCgroup}, podCounter("web"), podCounter("idle")
	for _, c := range []cpuCounter{node, pods, web, idle} {
		if r := h.observe(c, cpuSample{at: testNow, usage: sec}); r != nil {
			t.Errorf("%+v: first rate %d, want none", c, *r)
		}
	}
	// Counters are apart: the node's reading says nothing of a pod's.
	later := testNow.Add(time.Second)
	eq(t, "node rate", h.observe(node, cpuSample{at: later, usage: 3 * sec}), u64(2*sec))
	eq(t, "web rate", h.observe(web, cpuSample{at: later, usage: sec}), u64(0))

	// Only pods no longer listed are forgotten.
	h.retainPods(map[string]bool{"web": true})
	later = later.Add(time.Second)
	eq(t, "idle rate after it was forgotten", h.observe(idle, cpuSample{at: later, usage: 2 * sec}), nil)
	eq(t, "web rate", h.observe(web, cpuSample{at: later, usage: 2 * sec}), u64(sec))
	eq(t, "pods cgroup rate", h.observe(pods, cpuSample{at: later, usage: 2 * sec}), u64(sec/2))
	h.retainPods(nil)
	if len(h.last) != 2 {
		t.Errorf("history after every pod went: %v, want the node's and the pods cgroup's", h.last)
	}
}

// TestCPUHistoryConcurrent is for the race detector: Gets may run at once.
func TestCPUHistoryConcurrent(t *testing.T) {
	var h cpuHistory
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				c := podCounter(fmt.Sprint(i % 7))
				h.observe(c, cpuSample{at: testNow.Add(time.Duration(g*100+i) * time.Millisecond), usage: uint64(i)})
				if i%10 == 0 {
					h.retainPods(map[string]bool{"1": true})
				}
			}
		}()
	}
	wg.Wait()
}
