package cm

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAllocatable(t *testing.T) {
	capacity := res("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "100Gi", "pid", "32768")
	tests := []struct {
		name                         string
		capacity                     v1.ResourceList
		kubeReserved, systemReserved v1.ResourceList
		eviction                     string
		want                         v1.ResourceList
		wantErr                      []string
	}{{
		name:     "nothing reserved",
		capacity: capacity,
		want:     capacity,
	}, {
		name:           "reservations and the eviction threshold come off",
		capacity:       capacity,
		kubeReserved:   res("cpu", "500m", "memory", "1Gi", "pid", "1000"),
		systemReserved: res("cpu", "250m", "memory", "512Mi", "ephemeral-storage", "10Gi"),
		eviction:       "100Mi",
		want:           res("cpu", "3250m", "memory", "6556Mi", "pods", "110", "ephemeral-storage", "90Gi", "pid", "31768"),
	}, {
		name:     "a percentage threshold is a share of the memory capacity, in the kubelet's float32",
		capacity: capacity,
		eviction: "10%",
		// 8Gi * float32(0.1) = 858993472, not 858993459.
		want: res("cpu", "4", "memory", "7730941120", "pods", "110", "ephemeral-storage", "100Gi", "pid", "32768"),
	}, {
		name:     "0% means no threshold",
		capacity: capacity,
		eviction: "0%",
		want:     capacity,
	}, {
		name:     "so does 100%",
		capacity: capacity,
		eviction: "100%",
		want:     capacity,
	}, {
		name:         "a reservation for a resource the node lacks is ignored",
		capacity:     res("cpu", "2", "memory", "2Gi"),
		kubeReserved: res("pid", "100"),
		want:         res("cpu", "2", "memory", "2Gi"),
	}, {
		name:         "reserving all of it leaves 0",
		capacity:     res("cpu", "2", "memory", "2Gi"),
		kubeReserved: res("cpu", "2"),
		want:         res("cpu", "0", "memory", "2Gi"),
	}, {
		name:           "over-reserved memory: every term named",
		capacity:       res("cpu", "4", "memory", "23Gi"),
		kubeReserved:   res("memory", "30Gi"),
		systemReserved: res("memory", "1Gi"),
		eviction:       "100Mi",
		wantErr:        []string{"kubeReserved.memory (30Gi) + systemReserved.memory (1Gi) + evictionHard memory.available (100Mi) exceed the node's memory capacity (23Gi)"},
	}, {
		name:         "over-reserved by one field",
		capacity:     res("cpu", "2", "memory", "4Gi"),
		kubeReserved: res("cpu", "4"),
		wantErr:      []string{"kubeReserved.cpu (4) exceeds the node's cpu capacity (2)"},
	}, {
		name:     "the eviction threshold alone, as written",
		capacity: res("memory", "1Gi"),
		eviction: "2Gi",
		wantErr:  []string{"evictionHard memory.available (2Gi) exceeds the node's memory capacity (1Gi)"},
	}, {
		name:           "every over-reserved resource is reported",
		capacity:       res("cpu", "2", "memory", "4Gi", "pid", "1000"),
		systemReserved: res("cpu", "3", "pid", "2000"),
		wantErr: []string{
			"systemReserved.cpu (3) exceeds the node's cpu capacity (2)",
			"systemReserved.pid (2k) exceeds the node's pid capacity (1k)",
		},
	}, {
		name:     "a malformed threshold",
		capacity: capacity,
		eviction: "lots",
		wantErr:  []string{`evictionHard memory.available: "lots"`},
	}, {
		name:     "a negative percentage",
		capacity: capacity,
		eviction: "-5%",
		wantErr:  []string{`evictionHard memory.available: "-5%": want a percentage between 0% and 100%`},
	}, {
		name:     "a negative quantity",
		capacity: capacity,
		eviction: "-1Gi",
		wantErr:  []string{`evictionHard memory.available: "-1Gi": must not be negative`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Allocatable(tt.capacity, tt.kubeReserved, tt.systemReserved, tt.eviction)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; allocatable %v", describeList(got))
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\ndoes not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if describeList(got) != describeList(tt.want) {
				t.Errorf("got  %s\nwant %s", describeList(got), describeList(tt.want))
			}
		})
	}
}

func TestNodeAllocatableAbsolute(t *testing.T) {
	capacity := res("cpu", "4", "memory", "8Gi", "pid", "32768")
	got := NodeAllocatableAbsolute(capacity, res("cpu", "1", "memory", "1Gi"), res("memory", "8Gi", "pid", "768"))
	// No eviction threshold here; memory over-reserved stops at 0.
	if want := res("cpu", "3", "memory", "0", "pid", "32000"); describeList(got) != describeList(want) {
		t.Errorf("got  %s\nwant %s", describeList(got), describeList(want))
	}
	if q := capacity[v1.ResourceMemory]; q.Value() != 8*gi {
		t.Errorf("capacity modified: memory %s", q.String())
	}
}

// describeList renders a resource list by value, in name order.
func describeList(l v1.ResourceList) string {
	var b strings.Builder
	for _, name := range sortedNames(l) {
		q := l[name]
		b.WriteString(string(name) + "=" + q.AsDec().String() + " ")
	}
	return b.String()
}
