package containerd

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

func TestParseShim(t *testing.T) {
	const addr = "/var/lib/berth/containerd/containerd.sock"
	for _, tc := range []struct {
		name string
		argv []string
		want shimProcess
		ok   bool
	}{
		{"runc v2 shim", []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", addr},
			shimProcess{pid: 7, id: "abc", namespace: "k8s.io"}, true},
		{"double-dash flags", []string{"containerd-shim-runc-v2", "--namespace", "k8s.io", "--address", addr, "--id", "abc"},
			shimProcess{pid: 7, id: "abc", namespace: "k8s.io"}, true},
		{"another containerd's", []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", "/run/containerd/containerd.sock"},
			shimProcess{}, false},
		{"not a shim", []string{"/usr/bin/containerd", "-address", addr, "-id", "abc", "-namespace", "k8s.io"}, shimProcess{}, false},
		{"no id", []string{"containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", addr}, shimProcess{}, false},
		{"a flag without its value", []string{"containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", addr, "-id"}, shimProcess{}, false},
		{"empty", nil, shimProcess{}, false},
	} {
		got, ok := parseShim(7, tc.argv, addr)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: parseShim = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestOrphanShims(t *testing.T) {
	shims := []shimProcess{
		{pid: 1, id: "sandbox-a", namespace: "k8s.io"},
		{pid: 2, id: "forgotten", namespace: "k8s.io"},
		{pid: 3, id: "sandbox-a", namespace: "other"},
	}
	known := map[string]sets.Set[string]{"k8s.io": sets.New("sandbox-a", "container-of-a")}
	want := []shimProcess{{pid: 2, id: "forgotten", namespace: "k8s.io"}, {pid: 3, id: "sandbox-a", namespace: "other"}}
	if got := orphanShims(shims, known); !reflect.DeepEqual(got, want) {
		t.Errorf("orphanShims = %+v, want %+v", got, want)
	}
	if got := orphanShims(nil, known); got != nil {
		t.Errorf("no shims: %+v", got)
	}
}

func TestStillOrphans(t *testing.T) {
	a := shimProcess{pid: 10, id: "a", namespace: "k8s.io"}
	b := shimProcess{pid: 11, id: "b", namespace: "k8s.io"}
	aReused := shimProcess{pid: 10, id: "other", namespace: "k8s.io"}
	for _, tc := range []struct {
		name        string
		before, now []shimProcess
		want        []shimProcess
	}{
		{"first pass: suspects only", nil, []shimProcess{a}, nil},
		{"forgotten in two passes", []shimProcess{a, b}, []shimProcess{a}, []shimProcess{a}},
		{"known again, or gone", []shimProcess{a}, []shimProcess{b}, nil},
		{"the pid now runs another shim", []shimProcess{a}, []shimProcess{aReused}, nil},
	} {
		if got := stillOrphans(tc.before, tc.now); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: stillOrphans = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
