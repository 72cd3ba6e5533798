package bench

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseMachineCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		err        string
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// idle and iowait are left out, guest is inside user already.
		{"every field", "cpu  100 2 30 5000 40 5 6 7 50 1\ncpu0 1 2 3 4 5 6 7 8 9 10\n", 1500 * time.Millisecond, ""},
		{"no steal (old kernels)", "cpu 100 0 100 9 9 0 0\n", 2 * time.Second, ""},
		{"not the cpu line", "intr 1 2 3 4 5 6 7 8\n", 0, "not the cpu line"},
		{"too short", "cpu 1 2 3\n", 0, "not the cpu line"},
		{"not a number", "cpu 1 x 3 4 5 6 7 8\n", 0, "cpu field 2"},
		{"empty", "", 0, "not the cpu line"},
	} {
		got, err := parseMachineCPU([]byte(tc.stat))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestMachineCPUReadsThisHost(t *testing.T) {
	a, err := machineCPU()
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	b, err := machineCPU()
	if err != nil || b < a || a <= 0 {
		t.Errorf("machine CPU %v then %v (%v): want positive and not going back", a, b, err)
	}
}

// execsAtOnce keeps inFlight calls running for the window, counts those
// that finished, and gives up on the first error.
func TestExecsAtOnce(t *testing.T) {
	var running, most atomic.Int64
	exec := func() error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		return nil
	}
	done, _, took, err := execsAtOnce(context.Background(), 4, 100*time.Millisecond, exec)
	if err != nil {
		t.Fatal(err)
	}
	if most.Load() != 4 {
		t.Errorf("%d calls at once at most, want 4", most.Load())
	}
	if done < 4 || took < 100*time.Millisecond {
		t.Errorf("%d calls in %v: want at least one each, over the whole window", done, took)
	}

	boom := errors.New("shim gone")
	var calls atomic.Int64
	_, _, _, err = execsAtOnce(context.Background(), 3, time.Minute, func() error {
		if calls.Add(1) == 5 {
			return boom
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := execsAtOnce(ctx, 2, time.Minute, func() error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("with a cancelled context: %v, want context.Canceled", err)
	}
}
