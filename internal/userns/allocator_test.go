package userns

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestNewAllocator(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		first, length, perPod uint32
		maxPods               int
		wantErr               string
	}{
		{"default range", 65536, 1<<32 - 65536, 65536, 110, ""},
		{"subuid range", 1 << 20, 65536 * 110, 65536, 110, ""},
		{"per pod not a unit", 65536, 65536 * 10, 1000, 1, "not a multiple of 65536"},
		{"unaligned start", 100000, 65536 * 10, 65536, 1, "first subordinate ID 100000 is not a multiple"},
		{"starts at 0", 0, 65536 * 10, 65536, 1, "must be at least 65536"},
		{"unaligned length", 65536, 65536*10 + 1, 65536, 1, "count 655361 is not a multiple"},
		{"too few for max pods", 65536, 65536 * 10, 65536, 11, "not enough for 11 pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewAllocator(tc.first, tc.length, tc.perPod, tc.maxPods)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// step is one call on an allocator of 3 slots from host ID 2*65536.
type step struct {
	op      string // allocate, record, release
	pod     types.UID
	m       Mapping // record's argument; allocate's expected result
	wantErr string
	held    bool // release: whether it held one
}

func TestAllocatorSteps(t *testing.T) {
	const u = 65536
	slot := func(i uint32) Mapping { return Mapping{HostID: (2 + i) * u, Length: u} }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"disjoint ranges, lowest first", []step{
			{op: "allocate", pod: "a", m: slot(0)},
			{op: "allocate", pod: "b", m: slot(1)},
			{op: "allocate", pod: "a", m: slot(0)}, // the one it holds
		}},
		{"full, then a release frees one", []step{
			{op: "allocate", pod: "a", m: slot(0)},
			{op: "allocate", pod: "b", m: slot(1)},
			{op: "allocate", pod: "c", m: slot(2)},
			{op: "allocate", pod: "d", wantErr: "no free user namespace range"},
			{op: "release", pod: "b", held: true},
			{op: "release", pod: "b"},
			{op: "allocate", pod: "d", m: slot(1)},
		}},
		{"restore, then allocate around it", []step{
			{op: "record", pod: "old", m: slot(0)},
			{op: "record", pod: "old", m: slot(0)}, // again: no-op
			{op: "allocate", pod: "new", m: slot(1)},
		}},
		{"restore refuses what does not fit", []step{
			{op: "record", pod: "a", m: slot(1)},
			{op: "record", pod: "b", m: slot(1), wantErr: "held by pod a"},
			{op: "record", pod: "a", m: slot(2), wantErr: "already holds host IDs from 196608"},
			{op: "record", pod: "c", m: Mapping{HostID: 2*u + 1, Length: u}, wantErr: "not a multiple"},
			{op: "record", pod: "c", m: Mapping{HostID: 2 * u, Length: 2 * u}, wantErr: "range of 131072 IDs"},
			{op: "record", pod: "c", m: Mapping{HostID: u, Length: u}, wantErr: "outside the node's range"},
			{op: "record", pod: "c", m: slot(3), wantErr: "outside the node's range"},
			{op: "allocate", pod: "c", m: slot(0)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAllocator(2*u, 3*u, u, 3)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				var got Mapping
				var err error
				held := false
				switch s.op {
				case "allocate":
					got, err = a.Allocate(s.pod)
				case "record":
					err = a.Record(s.pod, s.m)
				case "release":
					held = a.Release(s.pod)
				}
				if (err != nil) != (s.wantErr != "") || (err != nil && !strings.Contains(err.Error(), s.wantErr)) {
					t.Fatalf("step %d %s %s: err = %v, want %q", i, s.op, s.pod, err, s.wantErr)
				}
				if s.op == "allocate" && err == nil && got != s.m {
					t.Errorf("step %d: allocate %s = %+v, want %+v", i, s.pod, got, s.m)
				}
				if s.op == "release" && held != s.held {
					t.Errorf("step %d: release %s held = %v, want %v", i, s.pod, held, s.held)
				}
			}
		})
	}
}

func TestParseSubID(t *testing.T) {
	for _, tc := range []struct {
		name          string
		data          string
		first, length uint32
		found         bool
		wantErr       string
	}{
		{"absent", "alice:100000:65536\n", 0, 0, false, ""},
		{"present", "# comment\nalice:100000:65536\nkubelet:655360:7208960\n", 655360, 7208960, true, ""},
		{"twice", "kubelet:65536:65536\nkubelet:131072:65536\n", 0, 0, false, "more than one range"},
		{"bad line", "kubelet:65536\n", 0, 0, false, "line 1: want name:first:count"},
		{"bad number", "kubelet:x:65536\n", 0, 0, false, "first ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, l, found, err := ParseSubID([]byte(tc.data), "kubelet")
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if f != tc.first || l != tc.length || found != tc.found {
				t.Errorf("got %d %d %v, want %d %d %v", f, l, found, tc.first, tc.length, tc.found)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		want    Mapping
		wantErr string
	}{
		{"ours", string(encode(Mapping{HostID: 131072, Length: 65536})), Mapping{HostID: 131072, Length: 65536}, ""},
		{"the kubelet's", `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
			Mapping{HostID: 65536, Length: 65536}, ""},
		{"not json", "{", Mapping{}, "unexpected end"},
		{"two uid mappings", `{"uidMappings":[{"hostId":1,"length":1},{"hostId":2,"length":1}],"gidMappings":[{"hostId":1,"length":1}]}`, Mapping{}, "exactly one"},
		{"gids differ", `{"uidMappings":[{"hostId":65536,"length":65536}],"gidMappings":[{"hostId":131072,"length":65536}]}`, Mapping{}, "gidMappings"},
		{"root unmapped", `{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}`, Mapping{}, "must be 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode([]byte(tc.data))
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
