package eviction

import (
	"strings"
	"testing"
	"time"
)

func TestParseThresholdConfig(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		hard, soft, grace, minReclaims map[string]string
		want                           string
	}{
		{
			name: "nothing",
			want: "",
		},
		{
			name: "the kubelet's defaults, in signal order",
			hard: DefaultEvictionHard(),
			want: "memory.available<100Mi; nodefs.available<10%; nodefs.inodesFree<5%; imagefs.available<15%; imagefs.inodesFree<5%",
		},
		{
			name:  "soft thresholds take their grace period and come after the hard ones",
			hard:  map[string]string{"pid.available": "1000", "memory.available": "1Gi"},
			soft:  map[string]string{"nodefs.available": "20%", "memory.available": "1.5Gi"},
			grace: map[string]string{"nodefs.available": "1m", "memory.available": "1m30s"},
			want:  "memory.available<1Gi; pid.available<1k; memory.available<1536Mi for 1m30s; nodefs.available<20% for 1m0s",
		},
		{
			name:        "a minimum reclaim applies to every threshold on its signal",
			hard:        map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
			soft:        map[string]string{"memory.available": "1Gi"},
			grace:       map[string]string{"memory.available": "10s"},
			minReclaims: map[string]string{"memory.available": "500Mi", "nodefs.available": "2.5%", "imagefs.available": "0"},
			want:        "memory.available<100Mi min 500Mi; nodefs.available<10% min 2.5%; memory.available<1Gi for 10s min 500Mi",
		},
		{
			name:  "0% and 100% disable a threshold, whatever the spelling; the grace period of a disabled soft one is fine",
			hard:  map[string]string{"memory.available": "0%", "nodefs.available": "100%", "nodefs.inodesFree": "0.0%", "imagefs.available": "100.00%", "pid.available": "1%"},
			soft:  map[string]string{"memory.available": "0%"},
			grace: map[string]string{"memory.available": "1m"},
			want:  "pid.available<1%",
		},
		{
			name: "fractional percentages",
			hard: map[string]string{"nodefs.available": "7.5%"},
			want: "nodefs.available<7.5%",
		},
		{
			name: "allocatableMemory.available is a signal, as in the kubelet",
			hard: map[string]string{"allocatableMemory.available": "200Mi"},
			want: "allocatableMemory.available<200Mi",
		},
		{
			name:  "a soft threshold with a zero grace period is hard",
			soft:  map[string]string{"memory.available": "1Gi"},
			grace: map[string]string{"memory.available": "0s"},
			want:  "memory.available<1Gi",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholdConfig(tc.hard, tc.soft, tc.grace, tc.minReclaims)
			if err != nil {
				t.Fatalf("ParseThresholdConfig: %v", err)
			}
			if d := describe(got); d != tc.want {
				t.Errorf("thresholds:\n got %s\nwant %s", d, tc.want)
			}
			for _, th := range got {
				if th.Operator != OpLessThan {
					t.Errorf("%s: operator %q, want %q", th, th.Operator, OpLessThan)
				}
			}
		})
	}
}

func TestParseThresholdConfigValueKinds(t *testing.T) {
	got, err := ParseThresholdConfig(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q := got[0].Value.Quantity; q == nil || q.Value() != 100<<20 {
		t.Errorf("memory.available quantity = %v, want 100Mi", q)
	}
	if v := got[1].Value; v.Quantity != nil || v.Percentage != float32(0.1) {
		t.Errorf("nodefs.available value = %+v, want the fraction 0.1", v)
	}
}

func TestParseThresholdConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		hard, soft, grace, minReclaims map[string]string
		want                           []string
	}{
		{
			name: "unknown signal in evictionHard",
			hard: map[string]string{"cpu.available": "1"},
			want: []string{`evictionHard["cpu.available"]: unsupported eviction signal (want one of memory.available, allocatableMemory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available)`},
		},
		{
			name:  "unknown signals in the other maps",
			soft:  map[string]string{"memory.free": "1Gi"},
			grace: map[string]string{"memory.free": "1m"},
			minReclaims: map[string]string{
				"disk.available": "1Gi",
			},
			want: []string{
				`evictionSoft["memory.free"]: unsupported eviction signal`,
				`evictionSoftGracePeriod["memory.free"]: unsupported eviction signal`,
				`evictionMinimumReclaim["disk.available"]: unsupported eviction signal`,
			},
		},
		{
			name:  "unparsable quantity",
			soft:  map[string]string{"nodefs.available": "abc"},
			grace: map[string]string{"nodefs.available": "1m"},
			want:  []string{`evictionSoft["nodefs.available"]: "abc": quantities must match the regular expression`},
		},
		{
			name: "negative quantity",
			hard: map[string]string{"memory.available": "-1Gi"},
			want: []string{`evictionHard["memory.available"]: "-1Gi": must be positive (use 0% to disable the threshold)`},
		},
		{
			name: "zero quantity",
			hard: map[string]string{"pid.available": "0"},
			want: []string{`evictionHard["pid.available"]: "0": must be positive`},
		},
		{
			name: "percentages out of range or not numbers",
			hard: map[string]string{"memory.available": "150%", "nodefs.available": "-5%", "nodefs.inodesFree": "abc%", "imagefs.available": "NaN%", "imagefs.inodesFree": "%"},
			want: []string{
				`evictionHard["memory.available"]: "150%": must be between 0% and 100%`,
				`evictionHard["nodefs.available"]: "-5%": must be between 0% and 100%`,
				`evictionHard["nodefs.inodesFree"]: "abc%": not a percentage (want a number followed by %, such as 10%)`,
				`evictionHard["imagefs.available"]: "NaN%": must be between 0% and 100%`,
				`evictionHard["imagefs.inodesFree"]: "%": not a percentage`,
			},
		},
		{
			name: "a soft threshold without a grace period",
			soft: map[string]string{"memory.available": "1Gi"},
			want: []string{`evictionSoft["memory.available"]: a soft eviction threshold needs a grace period: set evictionSoftGracePeriod["memory.available"]`},
		},
		{
			name:  "a grace period without a soft threshold",
			hard:  map[string]string{"memory.available": "1Gi"},
			grace: map[string]string{"memory.available": "1m"},
			want:  []string{`evictionSoftGracePeriod["memory.available"]: a grace period needs a soft eviction threshold: set evictionSoft["memory.available"]`},
		},
		{
			name:  "bad grace periods",
			soft:  map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"},
			grace: map[string]string{"memory.available": "soon", "nodefs.available": "-1s"},
			want: []string{
				`evictionSoftGracePeriod["memory.available"]: "soon": not a duration (want e.g. 1m30s)`,
				`evictionSoftGracePeriod["nodefs.available"]: "-1s": must not be negative`,
			},
		},
		{
			name:        "bad minimum reclaims",
			minReclaims: map[string]string{"memory.available": "-1Mi", "nodefs.available": "0%", "imagefs.available": "lots", "pid.available": "101%"},
			want: []string{
				`evictionMinimumReclaim["memory.available"]: "-1Mi": must not be negative`,
				`evictionMinimumReclaim["nodefs.available"]: "0%": a percentage must be positive`,
				`evictionMinimumReclaim["imagefs.available"]: "lots": quantities must match`,
				`evictionMinimumReclaim["pid.available"]: "101%": must be between 0% and 100%`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholdConfig(tc.hard, tc.soft, tc.grace, tc.minReclaims)
			if err == nil {
				t.Fatalf("ParseThresholdConfig = %s, want an error", describe(got))
			}
			if got != nil {
				t.Errorf("thresholds = %s, want none with an error", describe(got))
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("errors:\n%v\nwant %d of them", err, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, lines[i], w)
				}
			}
		})
	}
}

func TestWithAllocatableThresholds(t *testing.T) {
	hardMem := withMinReclaim(threshold(t, SignalMemoryAvailable, "100Mi", 0), "50Mi")
	softMem := threshold(t, SignalMemoryAvailable, "1Gi", time.Minute)
	disk := threshold(t, SignalNodeFsAvailable, "10%", 0)
	got := WithAllocatableThresholds([]Threshold{hardMem, softMem, disk})
	want := "memory.available<100Mi min 50Mi; memory.available<1Gi for 1m0s; nodefs.available<10%; allocatableMemory.available<100Mi min 50Mi"
	if d := describe(got); d != want {
		t.Errorf("got  %s\nwant %s", d, want)
	}
	own := threshold(t, SignalAllocatableMemoryAvailable, "300Mi", 0)
	if d := describe(WithAllocatableThresholds([]Threshold{hardMem, own})); d != "memory.available<100Mi min 50Mi; allocatableMemory.available<300Mi" {
		t.Errorf("with an allocatable threshold configured: %s", d)
	}
}

func TestDefaultEvictionHardIsFresh(t *testing.T) {
	DefaultEvictionHard()["memory.available"] = "1Gi"
	if got := DefaultEvictionHard()["memory.available"]; got != "100Mi" {
		t.Errorf("DefaultEvictionHard changed by a caller: memory.available = %s", got)
	}
}
