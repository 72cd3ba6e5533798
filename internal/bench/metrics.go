package bench

import (
	"math"

	dto "github.com/prometheus/client_model/go"
)

// histogram is one histogram (all its series summed) as scraped: the
// count, the sum and the cumulative count at each upper bound.
type histogram struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64
}

// histogramOf sums the series of family name whose labels include match.
func histogramOf(families map[string]*dto.MetricFamily, name string, match map[string]string) histogram {
	h := histogram{buckets: map[float64]uint64{}}
	for _, m := range families[name].GetMetric() {
		if !hasLabels(m, match) || m.GetHistogram() == nil {
			continue
		}
		h.count += m.GetHistogram().GetSampleCount()
		h.sum += m.GetHistogram().GetSampleSum()
		for _, b := range m.GetHistogram().GetBucket() {
			h.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return h
}

func hasLabels(m *dto.Metric, match map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(match)
}

// since is what was observed between an earlier scrape and h.
func (h histogram) since(earlier histogram) histogram {
	d := histogram{count: h.count - earlier.count, sum: h.sum - earlier.sum, buckets: map[float64]uint64{}}
	for le, c := range h.buckets {
		d.buckets[le] = c - earlier.buckets[le]
	}
	return d
}

// meanMs is the mean observation in milliseconds (the histograms are in
// seconds).
func (h histogram) meanMs() float64 {
	if h.count == 0 {
		return 0
	}
	return round3(h.sum / float64(h.count) * 1000)
}

// quantileMs is an upper bound of the q quantile in milliseconds: the
// smallest bucket bound with at least q of the observations at or below
// it. Beyond the last finite bound it is +Inf, reported as -1.
func (h histogram) quantileMs(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(h.count)))
	best := math.Inf(1)
	for le, c := range h.buckets {
		if c >= want && le < best {
			best = le
		}
	}
	if math.IsInf(best, 1) {
		return -1
	}
	return round3(best * 1000)
}

// counterSum sums the series of counter family name whose labels include
// match.
func counterSum(families map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	var sum float64
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, match) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// labelValue is m's value of label name, "" without it.
func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
