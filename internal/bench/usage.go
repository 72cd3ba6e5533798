package bench

import (
	"context"
	"time"
)

// Usage is what one process, or a group of them, cost over a window.
type Usage struct {
	Processes int     `json:"processes"`
	Cores     float64 `json:"cores"` // CPU time over wall time: 0.05 is 5% of one core; 4 decimals
	PeakRSS   float64 `json:"peak_rss_mib"`
	FinalRSS  float64 `json:"final_rss_mib"`
	// PeakAnonRSS is the most anonymous memory (RssAnon) a sample saw:
	// the part of the RSS the processes allocated, without their
	// executables' pages.
	PeakAnonRSS float64 `json:"peak_anon_rss_mib"`
}

// group names a set of processes to watch and how to find them; the
// shims' set changes as pods come and go, so it is found at each sample.
type group struct {
	pids         func() []int
	withChildren bool
}

// usageMeter follows groups of processes through one window: CPU from the
// first sample to the last, peak RSS from the kernel's VmHWM (reset at the
// start) and from every sample, final RSS from the last.
type usageMeter struct {
	groups []group
	start  time.Time
	first  []map[int]time.Duration
	peak   []uint64
	anon   []uint64 // peak RssAnon of the samples
	last   []procTotals
}

type procTotals struct {
	procs int
	cpu   map[int]time.Duration
	rss   uint64
	hwm   uint64
	anon  uint64
}

func newUsageMeter(groups ...group) *usageMeter {
	m := &usageMeter{groups: groups, peak: make([]uint64, len(groups)), anon: make([]uint64, len(groups)), last: make([]procTotals, len(groups))}
	for _, g := range groups {
		for _, pid := range g.pids() {
			_ = resetPeak(pid)
		}
	}
	m.start = time.Now()
	for i := range groups {
		t := m.read(i)
		m.first = append(m.first, t.cpu)
		m.last[i] = t
		m.peak[i], m.anon[i] = t.rss, t.anon
	}
	return m
}

func (m *usageMeter) read(i int) procTotals {
	t := procTotals{cpu: map[int]time.Duration{}}
	for _, pid := range m.groups[i].pids() {
		s, err := readProc(pid, m.groups[i].withChildren)
		if err != nil { // gone between the listing and the read
			continue
		}
		t.procs++
		t.cpu[pid] = s.cpu
		t.rss += s.rssBytes
		t.hwm += s.hwmBytes
		t.anon += s.anonBytes
	}
	return t
}

// sample reads every group once; call it every second or so.
func (m *usageMeter) sample() {
	for i := range m.groups {
		t := m.read(i)
		m.last[i] = t
		m.peak[i] = max(m.peak[i], t.rss)
		m.anon[i] = max(m.anon[i], t.anon)
	}
}

// sampleEvery samples until ctx is done or d has passed.
func (m *usageMeter) sampleEvery(ctx context.Context, every, d time.Duration) {
	end := time.After(d)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			m.sample()
			return
		case <-tick.C:
			m.sample()
		}
	}
}

// usage is group i's cost from the meter's start to its last sample. CPU
// counts the processes seen at both ends; a process that came or went
// in between counts what it used while both saw it, which is nothing.
func (m *usageMeter) usage(i int) Usage {
	wall := time.Since(m.start)
	var cpu time.Duration
	for pid, end := range m.last[i].cpu {
		if begin, ok := m.first[i][pid]; ok {
			cpu += end - begin
		}
	}
	peak := max(m.peak[i], m.last[i].hwm)
	return Usage{
		Processes:   m.last[i].procs,
		Cores:       round4(cpu.Seconds() / wall.Seconds()),
		PeakRSS:     mib(peak),
		FinalRSS:    mib(m.last[i].rss),
		PeakAnonRSS: mib(m.anon[i]),
	}
}

// cpuSeconds is group i's CPU from the meter's start to its last sample.
// Unlike usage it counts a process that started in between from zero (a
// new pod's shim), so it suits a window in which pods come; a process gone
// before the last sample is missed.
func (m *usageMeter) cpuSeconds(i int) float64 {
	var cpu time.Duration
	for pid, end := range m.last[i].cpu {
		cpu += end - m.first[i][pid] // a new process counts from zero
	}
	return round3(cpu.Seconds())
}

func mib(b uint64) float64 {
	return float64(int64(float64(b)/(1<<20)*10+0.5)) / 10
}
