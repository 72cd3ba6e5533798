package eviction

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The KubeletConfiguration fields the thresholds come from, for errors.
const (
	fieldHard       = "evictionHard"
	fieldSoft       = "evictionSoft"
	fieldGrace      = "evictionSoftGracePeriod"
	fieldMinReclaim = "evictionMinimumReclaim"
)

// ParseThresholdConfig turns the kubelet's four eviction maps into
// thresholds, as the kubelet's ParseThresholdConfig does: every value is a
// quantity ("100Mi") or a percentage of capacity ("10%"); "0%" and "100%"
// disable a signal's threshold; a soft threshold needs a grace period, and a
// grace period a soft threshold; a minimum reclaim applies to every
// threshold on its signal. The thresholds come back hard first, each group
// in the order of Signals.
//
// Every bad entry is reported, each naming its field, key and value, e.g.
// evictionSoft["nodefs.available"]: "abc": quantities must match ...
func ParseThresholdConfig(evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim map[string]string) ([]Threshold, error) {
	hard, errs := parseThresholds(fieldHard, evictionHard)
	soft, softErrs := parseThresholds(fieldSoft, evictionSoft)
	errs = append(errs, softErrs...)
	grace, graceErrs := parseGracePeriods(evictionSoftGracePeriod)
	errs = append(errs, graceErrs...)
	reclaim, reclaimErrs := parseMinimumReclaims(evictionMinimumReclaim)
	errs = append(errs, reclaimErrs...)

	// Pairing is checked on the keys as written, so that a disabled soft
	// threshold ("0%") may keep its grace period.
	for _, key := range slices.Sorted(maps.Keys(evictionSoft)) {
		if _, ok := evictionSoftGracePeriod[key]; !ok && validSignal(Signal(key)) {
			errs = append(errs, entryError(fieldSoft, key, fmt.Errorf("a soft eviction threshold needs a grace period: set %s[%q]", fieldGrace, key)))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(evictionSoftGracePeriod)) {
		if _, ok := evictionSoft[key]; !ok && validSignal(Signal(key)) {
			errs = append(errs, entryError(fieldGrace, key, fmt.Errorf("a grace period needs a soft eviction threshold: set %s[%q]", fieldSoft, key)))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	for i := range soft {
		soft[i].GracePeriod = grace[soft[i].Signal]
	}
	out := append(hard, soft...)
	for i := range out {
		if r, ok := reclaim[out[i].Signal]; ok {
			out[i].MinReclaim = &r
		}
	}
	return out, nil
}

func entryError(field, key string, err error) error {
	return fmt.Errorf("%s[%q]: %w", field, key, err)
}

func valueError(field, key, value string, err error) error {
	return fmt.Errorf("%s[%q]: %q: %w", field, key, value, err)
}

// parseSignal checks a map key.
func parseSignal(field, key string) (Signal, error) {
	if !validSignal(Signal(key)) {
		return "", entryError(field, key, fmt.Errorf("unsupported eviction signal (want one of %s)", signalNames()))
	}
	return Signal(key), nil
}

// parseThresholds parses evictionHard or evictionSoft, in signal order.
func parseThresholds(field string, m map[string]string) ([]Threshold, []error) {
	var out []Threshold
	var errs []error
	for _, key := range sortedBySignal(m) {
		signal, err := parseSignal(field, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		value, disabled, err := parseThresholdValue(m[key])
		if err != nil {
			errs = append(errs, valueError(field, key, m[key], err))
			continue
		}
		if disabled {
			continue
		}
		out = append(out, Threshold{Signal: signal, Operator: OpLessThan, Value: value})
	}
	return out, errs
}

// parseThresholdValue parses a threshold's value. A threshold of 0% can
// never be met and one of 100% always is: the kubelet takes both to mean
// "no threshold" (berth also when spelled "0.0%" or "100.00%").
func parseThresholdValue(v string) (value ThresholdValue, disabled bool, err error) {
	if strings.HasSuffix(v, "%") {
		p, err := parsePercentage(v)
		if err != nil {
			return ThresholdValue{}, false, err
		}
		if p == 0 || p == 1 {
			return ThresholdValue{}, true, nil
		}
		return ThresholdValue{Percentage: p}, false, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return ThresholdValue{}, false, err
	}
	if q.Sign() <= 0 {
		return ThresholdValue{}, false, errors.New("must be positive (use 0% to disable the threshold)")
	}
	return ThresholdValue{Quantity: &q}, false, nil
}

// parsePercentage parses "12.5%" into 0.125, a float32 as in the kubelet.
func parsePercentage(v string) (float32, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 32)
	if err != nil {
		return 0, errors.New("not a percentage (want a number followed by %, such as 10%)")
	}
	if math.IsNaN(f) || f < 0 || f > 100 {
		return 0, errors.New("must be between 0% and 100%")
	}
	return float32(f) / 100, nil
}

func parseGracePeriods(m map[string]string) (map[Signal]time.Duration, []error) {
	out := map[Signal]time.Duration{}
	var errs []error
	for _, key := range sortedBySignal(m) {
		signal, err := parseSignal(fieldGrace, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := time.ParseDuration(m[key])
		if err != nil {
			errs = append(errs, valueError(fieldGrace, key, m[key], errors.New("not a duration (want e.g. 1m30s)")))
			continue
		}
		if d < 0 {
			errs = append(errs, valueError(fieldGrace, key, m[key], errors.New("must not be negative")))
			continue
		}
		out[signal] = d
	}
	return out, errs
}

func parseMinimumReclaims(m map[string]string) (map[Signal]ThresholdValue, []error) {
	out := map[Signal]ThresholdValue{}
	var errs []error
	for _, key := range sortedBySignal(m) {
		signal, err := parseSignal(fieldMinReclaim, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v := m[key]
		if strings.HasSuffix(v, "%") {
			p, err := parsePercentage(v)
			if err == nil && p == 0 {
				err = errors.New("a percentage must be positive")
			}
			if err != nil {
				errs = append(errs, valueError(fieldMinReclaim, key, v, err))
				continue
			}
			out[signal] = ThresholdValue{Percentage: p}
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err == nil && q.Sign() < 0 {
			err = errors.New("must not be negative")
		}
		if err != nil {
			errs = append(errs, valueError(fieldMinReclaim, key, v, err))
			continue
		}
		out[signal] = ThresholdValue{Quantity: &q}
	}
	return out, errs
}

// sortedBySignal orders a map's keys as Signals does, unknown keys last in
// alphabetical order, so that results and errors come out the same every
// time.
func sortedBySignal(m map[string]string) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		ra, rb := signalRank(Signal(a)), signalRank(Signal(b))
		if ra < 0 {
			ra = math.MaxInt
		}
		if rb < 0 {
			rb = math.MaxInt
		}
		return cmp.Or(cmp.Compare(ra, rb), strings.Compare(a, b))
	})
}
