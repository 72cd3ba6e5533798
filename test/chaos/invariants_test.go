package chaos

import (
	"strings"
	"testing"
)

// node2 is an observation of two converged pods: "a" with containers main
// and side holding no widget, "b" whose main holds w0 and w1.
func node2() ([]WantPod, Observation) {
	want := []WantPod{
		{Name: "a", Containers: []string{"main", "side"}},
		{Name: "b", Containers: []string{"main"}, Widgets: 2},
	}
	obs := Observation{
		Pods: []PodView{
			{Name: "a", UID: "ua", Phase: "Running", Ready: true, Restarts: map[string]int32{"main": 0, "side": 0}},
			{Name: "b", UID: "ub", Phase: "Running", Ready: true, Restarts: map[string]int32{"main": 0}},
		},
		Containers: []ContainerView{
			{ID: "c1", PodUID: "ua", Name: "main", Running: true},
			{ID: "c2", PodUID: "ua", Name: "side", Running: true},
			{ID: "c3", PodUID: "ub", Name: "main", Running: true, Devices: []string{"w0", "w1"}},
		},
		Sandboxes:   []SandboxView{{ID: "s1", PodUID: "ua", Ready: true}, {ID: "s2", PodUID: "ub", Ready: true}},
		Allocations: []Allocation{{PodUID: "ub", Container: "main", Devices: []string{"w1", "w0"}}},
	}
	return want, obs
}

func kinds(vs []Violation) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return strings.Join(out, ",")
}

func TestConverged(t *testing.T) {
	tests := []struct {
		name   string
		change func(*[]WantPod, *Observation)
		ok     bool
		says   string
	}{
		{"all running", func(*[]WantPod, *Observation) {}, true, ""},
		{"not ready", func(_ *[]WantPod, o *Observation) { o.Pods[0].Ready = false }, false, "a: Running ready=false"},
		{"an older generation", func(w *[]WantPod, _ *Observation) { (*w)[1].Gen = 1 }, false, "b: generation 0, want 1"},
		{"pending", func(_ *[]WantPod, o *Observation) { o.Pods[1].Phase = "Pending" }, false, "b: Pending"},
		{"a container exited", func(_ *[]WantPod, o *Observation) { o.Containers[1].Running = false }, false, "a/side: 0 running"},
		{"a pod missing", func(_ *[]WantPod, o *Observation) { o.Pods = o.Pods[:1] }, false, "b: 0 live pods"},
		{"a deleted pod does not count", func(_ *[]WantPod, o *Observation) { o.Pods[1].Deleting = true }, false, "b: 0 live pods"},
		{"no ready sandbox", func(_ *[]WantPod, o *Observation) { o.Sandboxes[1].Ready = false }, false, "b: 0 ready sandboxes"},
		{"an unwanted pod still runs", func(w *[]WantPod, _ *Observation) { *w = (*w)[:1] }, false, "unwanted pod ub"},
		{"an old sandbox that is not ready is fine", func(_ *[]WantPod, o *Observation) {
			o.Sandboxes = append(o.Sandboxes, SandboxView{ID: "old", PodUID: "gone"})
		}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, obs := node2()
			tt.change(&want, &obs)
			ok, desc := Converged(want, obs)
			if ok != tt.ok || !strings.Contains(desc, tt.says) {
				t.Errorf("Converged = %v, %q; want %v, containing %q", ok, desc, tt.ok, tt.says)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		change   func(*Observation)
		replaced map[string]bool
		bumpGen  bool
		want     string // violation kinds, in order
	}{
		{"nothing changed", func(*Observation) {}, nil, false, ""},
		{"a container was replaced", func(o *Observation) { o.Containers[0].ID = "c9" }, nil, false, "restarted"},
		{"a restart count grew", func(o *Observation) { o.Pods[0].Restarts["side"] = 1 }, nil, false, "restarted"},
		{"the pod was replaced", func(o *Observation) {
			o.Pods[0].UID = "ua2"
			for i := range o.Containers[:2] {
				o.Containers[i].PodUID = "ua2"
			}
		}, nil, false, "replaced"},
		{"a replacement the harness made is fine", func(o *Observation) { o.Pods[0].UID = "ua2"; o.Containers[0].PodUID = "ua2" }, map[string]bool{"a": true}, false, ""},
		{"a new generation is fine", func(o *Observation) { o.Containers[0].ID = "c9" }, nil, true, ""},
		{"two instances of one container", func(o *Observation) {
			o.Containers = append(o.Containers, ContainerView{ID: "c4", PodUID: "ua", Name: "main", Running: true})
		}, nil, false, "duplicate"},
		{"an exited old instance is fine", func(o *Observation) {
			o.Containers = append(o.Containers, ContainerView{ID: "c0", PodUID: "ua", Name: "main"})
		}, nil, false, ""},
		{"one widget in two pods", func(o *Observation) { o.Containers[0].Devices = []string{"w1"} }, nil, false, "device-twice,devices"},
		{"berth books one widget twice", func(o *Observation) {
			o.Allocations = append(o.Allocations, Allocation{PodUID: "ua", Container: "main", Devices: []string{"w0"}})
		}, nil, false, "device-twice"},
		{"berth lost the books of a running pod", func(o *Observation) { o.Allocations = nil }, nil, false, "device-books"},
		{"fewer widgets than asked", func(o *Observation) {
			o.Containers[2].Devices = []string{"w0"}
			o.Allocations[0].Devices = []string{"w0"}
		}, nil, false, "devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, before := node2()
			base := Record(want, before)
			_, obs := node2()
			tt.change(&obs)
			if tt.bumpGen {
				want[0].Gen++
				obs.Pods[0].Gen++
			}
			if got := kinds(Check(want, base, tt.replaced, obs)); got != tt.want {
				t.Errorf("violations %q, want %q: %v", got, tt.want, Check(want, base, tt.replaced, obs))
			}
		})
	}
}

func TestRecord(t *testing.T) {
	want, obs := node2()
	base := Record(want, obs)
	if k := base["a"]; k.UID != "ua" || k.IDs["main"] != "c1" || k.IDs["side"] != "c2" || len(k.Restarts) != 2 {
		t.Errorf("baseline of a: %+v", k)
	}
	if len(base) != 2 {
		t.Errorf("baseline: %+v", base)
	}
}

func TestQuarantined(t *testing.T) {
	obs := Observation{Pods: []PodView{
		{Name: "a", Phase: "Failed", Reason: "InvalidManifest"},
		{Name: "b", Phase: "Failed", Reason: "Evicted"},
		{Name: "c", Phase: "Running"},
	}}
	for name, want := range map[string]bool{"a": true, "b": false, "c": false, "d": false} {
		if got := Quarantined(obs, name); got != want {
			t.Errorf("Quarantined(%s) = %v", name, got)
		}
	}
}

// One widget held by two pods reads the same whatever order the runtime
// lists them in, so that a run reports it once.
func TestAlwaysIsOrderFree(t *testing.T) {
	_, obs := node2()
	obs.Containers[0].Devices = []string{"w0"}
	a := Always(obs)
	obs.Containers[0], obs.Containers[2] = obs.Containers[2], obs.Containers[0]
	b := Always(obs)
	if len(a) != 1 || len(b) != 1 || a[0] != b[0] {
		t.Errorf("%v vs %v", a, b)
	}
}

// A pod berth does not list (just restarted) is named from the runtime.
func TestAlwaysNamesUnlistedPods(t *testing.T) {
	_, obs := node2()
	obs.Containers[0].Devices = []string{"w0"}
	obs.Containers[2].PodName = "b-from-runtime"
	obs.Pods = obs.Pods[:1]
	vs := Always(obs)
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "b-from-runtime/main") {
		t.Errorf("%v", vs)
	}
}
