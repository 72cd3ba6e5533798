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
		evictionHard                 map[string]string
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
		evictionHard:   memoryAvailable("100Mi"),
		want:           res("cpu", "3250m", "memory", "6556Mi", "pods", "110", "ephemeral-storage", "90Gi", "pid", "31768"),
	}, {
		name:         "a percentage threshold is a share of the memory capacity, in the kubelet's float32",
		capacity:     capacity,
		evictionHard: memoryAvailable("10%"),
		// 8Gi * float32(0.1) = 858993472, not 858993459.
		want: res("cpu", "4", "memory", "7730941120", "pods", "110", "ephemeral-storage", "100Gi", "pid", "32768"),
	}, {
		name:         "0% means no threshold",
		capacity:     capacity,
		evictionHard: memoryAvailable("0%"),
		want:         capacity,
	}, {
		name:         "so does 100%",
		capacity:     capacity,
		evictionHard: memoryAvailable("100%"),
		want:         capacity,
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
		evictionHard:   memoryAvailable("100Mi"),
		wantErr:        []string{"kubeReserved.memory (30Gi) + systemReserved.memory (1Gi) + evictionHard memory.available (100Mi) exceed the node's memory capacity (23Gi)"},
	}, {
		name:         "over-reserved by one field",
		capacity:     res("cpu", "2", "memory", "4Gi"),
		kubeReserved: res("cpu", "4"),
		wantErr:      []string{"kubeReserved.cpu (4) exceeds the node's cpu capacity (2)"},
	}, {
		name:         "the eviction threshold alone, as written",
		capacity:     res("memory", "1Gi"),
		evictionHard: memoryAvailable("2Gi"),
		wantErr:      []string{"evictionHard memory.available (2Gi) exceeds the node's memory capacity (1Gi)"},
	}, {
		name:           "every over-reserved resource is reported",
		capacity:       res("cpu", "2", "memory", "4Gi", "pid", "1000"),
		systemReserved: res("cpu", "3", "pid", "2000"),
		wantErr: []string{
			"systemReserved.cpu (3) exceeds the node's cpu capacity (2)",
			"systemReserved.pid (2k) exceeds the node's pid capacity (1k)",
		},
	}, {
		name:         "a malformed threshold",
		capacity:     capacity,
		evictionHard: memoryAvailable("lots"),
		wantErr:      []string{`evictionHard memory.available: "lots"`},
	}, {
		name:         "a negative percentage",
		capacity:     capacity,
		evictionHard: memoryAvailable("-5%"),
		wantErr:      []string{`evictionHard memory.available: "-5%": want a percentage between 0% and 100%`},
	}, {
		name:         "a negative quantity",
		capacity:     capacity,
		evictionHard: memoryAvailable("-1Gi"),
		wantErr:      []string{`evictionHard memory.available: "-1Gi": must not be negative`},
	}, {
		name:         "nodefs.available as a quantity comes off ephemeral-storage",
		capacity:     capacity,
		evictionHard: map[string]string{"nodefs.available": "10Gi"},
		want:         res("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "90Gi", "pid", "32768"),
	}, {
		name:         "nodefs.available as a percentage of ephemeral-storage, in float32",
		capacity:     capacity,
		evictionHard: map[string]string{"nodefs.available": "10%"},
		// 100Gi * float32(0.1) = 10737418400, not 10737418240.
		want: res("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "96636764000", "pid", "32768"),
	}, {
		name:     "the kubelet's default evictionHard: only memory and nodefs are reserved",
		capacity: capacity,
		evictionHard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
			"imagefs.available": "15%", "imagefs.inodesFree": "5%",
		},
		want: res("cpu", "4", "memory", "8092Mi", "pods", "110", "ephemeral-storage", "96636764000", "pid", "32768"),
	}, {
		name:           "nodefs.available adds to the ephemeral-storage reservations",
		capacity:       capacity,
		systemReserved: res("ephemeral-storage", "5Gi"),
		kubeReserved:   res("ephemeral-storage", "5Gi"),
		evictionHard:   map[string]string{"nodefs.available": "20Gi"},
		want:           res("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "70Gi", "pid", "32768"),
	}, {
		name:         "a nodefs percentage without ephemeral-storage capacity reserves nothing",
		capacity:     res("cpu", "2", "memory", "2Gi"),
		evictionHard: map[string]string{"nodefs.available": "10%"},
		want:         res("cpu", "2", "memory", "2Gi"),
	}, {
		name:           "over-reserved ephemeral-storage names the nodefs threshold as written",
		capacity:       capacity,
		systemReserved: res("ephemeral-storage", "10Gi"),
		evictionHard:   map[string]string{"nodefs.available": "95%"},
		wantErr:        []string{"systemReserved.ephemeral-storage (10Gi) + evictionHard nodefs.available (95%) exceed the node's ephemeral-storage capacity (100Gi)"},
	}, {
		name:         "the nodefs threshold alone",
		capacity:     capacity,
		evictionHard: map[string]string{"nodefs.available": "200Gi"},
		wantErr:      []string{"evictionHard nodefs.available (200Gi) exceeds the node's ephemeral-storage capacity (100Gi)"},
	}, {
		name:         "every malformed threshold is reported",
		capacity:     capacity,
		evictionHard: map[string]string{"memory.available": "lots", "nodefs.available": "110%"},
		wantErr: []string{
			`evictionHard memory.available: "lots"`,
			`evictionHard nodefs.available: "110%": want a percentage between 0% and 100%`,
		},
	}, {
		name:         "huge pages come off memory; their own allocatable is their capacity",
		capacity:     res("cpu", "4", "memory", "8Gi", "hugepages-2Mi", "1Gi", "hugepages-1Gi", "2Gi"),
		evictionHard: memoryAvailable("100Mi"),
		want:         res("cpu", "4", "memory", "5020Mi", "hugepages-2Mi", "1Gi", "hugepages-1Gi", "2Gi"),
	}, {
		name:         "a huge page size with no pages takes nothing",
		capacity:     res("memory", "8Gi", "hugepages-2Mi", "0", "hugepages-1Gi", "0"),
		evictionHard: memoryAvailable("100Mi"),
		want:         res("memory", "8092Mi", "hugepages-2Mi", "0", "hugepages-1Gi", "0"),
	}, {
		name:         "huge pages are reserved like any resource",
		capacity:     res("memory", "8Gi", "hugepages-2Mi", "1Gi"),
		kubeReserved: res("hugepages-2Mi", "256Mi"),
		// Memory loses the huge pages' capacity, not their allocatable.
		want: res("memory", "7Gi", "hugepages-2Mi", "768Mi"),
	}, {
		name:         "huge pages beyond what memory has left stop memory at 0",
		capacity:     res("cpu", "2", "memory", "4Gi", "hugepages-1Gi", "8Gi"),
		evictionHard: memoryAvailable("100Mi"),
		want:         res("cpu", "2", "memory", "0", "hugepages-1Gi", "8Gi"),
	}, {
		name:         "memory reservations are checked against the whole memory, before the huge pages",
		capacity:     res("memory", "8Gi", "hugepages-1Gi", "6Gi"),
		kubeReserved: res("memory", "4Gi"),
		want:         res("memory", "0", "hugepages-1Gi", "6Gi"),
	}, {
		name:     "huge pages without memory capacity add no memory",
		capacity: res("cpu", "2", "hugepages-2Mi", "1Gi"),
		want:     res("cpu", "2", "hugepages-2Mi", "1Gi"),
	}, {
		name:         "over-reserved huge pages",
		capacity:     res("memory", "8Gi", "hugepages-2Mi", "1Gi"),
		kubeReserved: res("hugepages-2Mi", "2Gi"),
		wantErr:      []string{"kubeReserved.hugepages-2Mi (2Gi) exceeds the node's hugepages-2Mi capacity (1Gi)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Allocatable(tt.capacity, tt.kubeReserved, tt.systemReserved, tt.evictionHard)
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

func TestAllocatableKeepsCapacity(t *testing.T) {
	capacity := res("memory", "8Gi", "ephemeral-storage", "100Gi", "hugepages-1Gi", "2Gi")
	before := describeList(capacity)
	if _, err := Allocatable(capacity, res("memory", "1Gi"), nil, map[string]string{"memory.available": "10%", "nodefs.available": "10%"}); err != nil {
		t.Fatal(err)
	}
	if after := describeList(capacity); after != before {
		t.Errorf("capacity modified:\n%s\nwas\n%s", after, before)
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

func memoryAvailable(threshold string) map[string]string {
	return map[string]string{"memory.available": threshold}
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
