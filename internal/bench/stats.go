package bench

import (
	"slices"
	"time"
)

// Latency summarises a set of durations in milliseconds, the unit every
// figure of the report uses.
type Latency struct {
	N     int     `json:"n"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Total float64 `json:"total_ms"` // the last one: from the common start to the slowest
}

// Summarize returns the nearest-rank percentiles of ds. Each duration is
// measured from one common start, so the largest is also the total.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return Latency{
		N:     len(s),
		P50:   ms(percentile(s, 50)),
		P90:   ms(percentile(s, 90)),
		P99:   ms(percentile(s, 99)),
		Max:   ms(s[len(s)-1]),
		Total: ms(s[len(s)-1]),
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// Ratio compares berth's latencies with the floor's, percentile by
// percentile: 1.10 is 10% above the floor. A missing floor gives zeros.
type Ratio struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func ratioOf(berth, floor Latency) Ratio {
	div := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return round3(a / b)
	}
	return Ratio{P50: div(berth.P50, floor.P50), P90: div(berth.P90, floor.P90), P99: div(berth.P99, floor.P99), Max: div(berth.Max, floor.Max)}
}

func round3(f float64) float64 {
	return float64(int64(f*1000+0.5)) / 1000
}

// round4 keeps a fourth decimal: an idle agent's cores are a few
// thousandths, and its target is one.
func round4(f float64) float64 {
	return float64(int64(f*10000+0.5)) / 10000
}
