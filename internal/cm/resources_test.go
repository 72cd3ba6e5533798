package cm

import "testing"

func TestMilliCPUToShares(t *testing.T) {
	for _, tt := range []struct {
		milli int64
		want  uint64
	}{
		{0, 2}, {1, 2}, {2, 2}, {3, 3}, {100, 102}, {250, 256}, {500, 512}, {1000, 1024},
		{1500, 1536}, {2000, 2048}, {3000, 3072}, {256000, 262144}, {1000000, 262144}, {-5, 2},
	} {
		if got := MilliCPUToShares(tt.milli); got != tt.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	for _, tt := range []struct{ milli, period, want int64 }{
		{0, 100000, 0}, {1, 100000, 1000}, {5, 100000, 1000}, {10, 100000, 1000}, {11, 100000, 1100},
		{200, 100000, 20000}, {500, 100000, 50000}, {1000, 100000, 100000}, {2500, 100000, 250000},
		{3000, 100000, 300000}, {500, 50000, 25000}, {10, 50000, 1000},
	} {
		if got := MilliCPUToQuota(tt.milli, tt.period); got != tt.want {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tt.milli, tt.period, got, tt.want)
		}
	}
}

func TestSharesToWeight(t *testing.T) {
	for _, tt := range []struct{ shares, want uint64 }{
		{2, 1}, {1024, 39}, {262144, 10000},
		{100, 4}, {2048, 79}, {3072, 118},
		{0, 1}, {1, 1}, {300000, 10000}, // clamped to the v1 range first
	} {
		if got := SharesToWeight(tt.shares); got != tt.want {
			t.Errorf("SharesToWeight(%d) = %d, want %d", tt.shares, got, tt.want)
		}
	}
}
