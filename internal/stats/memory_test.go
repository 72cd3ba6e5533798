package stats

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestWorkingSetAndAvailable(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		usage, inactive, limit  uint64
		wantWorkingSet, wantAvl uint64
	}{
		{"inactive file is reclaimable", 1000, 300, 4000, 700, 3300},
		{"no inactive file", 1000, 0, 1000, 1000, 0},
		{"inactive above usage (counters read apart)", 100, 200, 1000, 0, 1000},
		{"working set above the limit", 5000, 0, 4000, 5000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workingSet(tc.usage, tc.inactive)
			if ws != tc.wantWorkingSet {
				t.Errorf("workingSet(%d, %d) = %d, want %d", tc.usage, tc.inactive, ws, tc.wantWorkingSet)
			}
			if got := availableBytes(tc.limit, ws); got != tc.wantAvl {
				t.Errorf("availableBytes(%d, %d) = %d, want %d", tc.limit, ws, got, tc.wantAvl)
			}
		})
	}
}

func TestLimitOf(t *testing.T) {
	v1Unlimited := uint64(9223372036854771712) // LONG_MAX rounded to a 4 KiB page
	for _, tc := range []struct {
		v    uint64
		ok   bool
		want *uint64
	}{
		{1 << 30, true, ptr(uint64(1 << 30))},
		{v1Unlimited, true, nil},
		{0, false, nil},
		{unlimitedMemory, true, ptr(unlimitedMemory)},
	} {
		if got := limitOf(tc.v, tc.ok); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("limitOf(%d, %v) = %v, want %v", tc.v, tc.ok, deref(got), deref(tc.want))
		}
	}
}

func TestMemoryReadingToStats(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	m := memoryReading{Usage: 1000, WorkingSet: 600, RSS: 400, PageFaults: 7, MajorFault: 1}
	got := m.toStats(now)
	want := &statsapi.MemoryStats{
		Time: now, UsageBytes: ptr(uint64(1000)), WorkingSetBytes: ptr(uint64(600)), RSSBytes: ptr(uint64(400)),
		PageFaults: ptr(uint64(7)), MajorPageFaults: ptr(uint64(1)),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unlimited: %+v, want %+v (no AvailableBytes)", got, want)
	}
	m.Limit = ptr(uint64(2000))
	if got := m.toStats(now); got.AvailableBytes == nil || *got.AvailableBytes != 1400 {
		t.Errorf("limited to 2000: AvailableBytes = %v, want 1400", deref(got.AvailableBytes))
	}
}

func TestParseFlatKeyed(t *testing.T) {
	data := "cache 4096\ntotal_inactive_file 8192\n  total_rss 12288 \nbroken\nweird abc\n\n"
	got, err := parseFlatKeyed("memory.stat", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"cache": 4096, "total_inactive_file": 8192, "total_rss": 12288}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseFlatKeyed = %v, want %v", got, want)
	}
}

func TestParseMeminfo(t *testing.T) {
	data := "MemTotal:        8048576 kB\nMemFree:         1024 kB\nHugePages_Total:       0\nBogus line\n"
	got, err := parseMeminfo("meminfo", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"MemTotal": 8048576 * 1024, "MemFree": 1024 * 1024, "HugePages_Total": 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseMeminfo = %v, want %v", got, want)
	}
}

func TestV2RootMemory(t *testing.T) {
	meminfo := map[string]uint64{"MemTotal": 8 << 30, "MemFree": 3 << 30}
	stat := map[string]uint64{"inactive_file": 1 << 30, "anon": 2 << 30, "pgfault": 9, "pgmajfault": 2}
	got := v2RootMemory(meminfo, stat)
	want := memoryReading{Usage: 5 << 30, WorkingSet: 4 << 30, RSS: 2 << 30, PageFaults: 9, MajorFault: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("v2RootMemory = %+v, want %+v", got, want)
	}
}

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}
