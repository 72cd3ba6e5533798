package agent

import (
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/lifecycle"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/v1helper"
)

// sized is a pod requesting cpu (and as much as a limit: Guaranteed when
// guaranteed), from the API (an ordinary pod) unless static.
func sized(name, uid, cpu string) *v1.Pod {
	p := pod(name, uid)
	p.Annotations = map[string]string{v1helper.ConfigSourceAnnotationKey: v1helper.ApiserverSource}
	c := v1.Container{Name: "c"}
	if cpu != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	}
	p.Spec.Containers = []v1.Container{c}
	return p
}

func critical(p *v1.Pod) *v1.Pod {
	p.Spec.Priority = ptr.To(v1helper.SystemCriticalPriority + 1000)
	return p
}

func testNode(cpu string, pods int64) *v1.Node {
	n := nodeObject("node", v1.ResourceList{}, v1.ResourceList{
		v1.ResourceCPU:  resource.MustParse(cpu),
		v1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI),
	}, nil, nil)
	return n
}

// env is an admitEnv over sets of UIDs.
func env(node *v1.Node, terminal, adopted []types.UID) admitEnv {
	return admitEnv{
		node:     node,
		terminal: func(uid types.UID) bool { return slices.Contains(terminal, uid) },
		adopted:  func(uid types.UID) bool { return slices.Contains(adopted, uid) },
	}
}

// testAdmitter admits with berth's pipeline, without node pressure or
// sysctls; its rejections are not published.
func testAdmitter() *admitter {
	return newAdmitter(lifecycle.NewPipeline(nil, nil, lifecycle.NodeFeatures{}), lifecycle.Rejecter{}, nil, nil)
}

// resizedTo allocates the named pods the CPU given, as an in-place resize
// does.
type resizedTo map[types.UID]string

func (r resizedTo) Allocated(pod *v1.Pod) *v1.Pod {
	cpu, ok := r[pod.UID]
	if !ok {
		return pod
	}
	out := pod.DeepCopy()
	out.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	return out
}

// TestAdmitCountsResizedAllocations checks that a new pod is admitted
// against what an admitted pod holds after an in-place resize, not what it
// was admitted with, both ways.
func TestAdmitCountsResizedAllocations(t *testing.T) {
	alloc := resizedTo{}
	a := newAdmitter(lifecycle.NewPipeline(nil, nil, lifecycle.NodeFeatures{}), lifecycle.Rejecter{}, nil, alloc)
	first := desiredFrom(snapshot(sized("a", "1", "500m")), nil)
	a.admit(first, nil, env(testNode("2", 110), nil, nil))
	alloc["1"] = "1500m" // a grew in place
	grown := desiredFrom(snapshot(sized("a", "1", "500m"), sized("b", "2", "1")), first)
	a.admit(grown, first, env(testNode("2", 110), nil, nil))
	want := map[string]string{"default/b": "OutOfcpu: Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"}
	if got := rejectedReasons(grown); !maps.Equal(got, want) {
		t.Errorf("after a grew: rejected %v, want %v", got, want)
	}
	alloc["1"] = "200m" // a shrank in place
	shrunk := desiredFrom(snapshot(sized("a", "1", "500m"), sized("c", "3", "1800m")), grown)
	a.admit(shrunk, grown, env(testNode("2", 110), nil, nil))
	if got := rejectedReasons(shrunk); len(got) != 0 {
		t.Errorf("after a shrank: rejected %v, want c admitted", got)
	}
}

func snapshot(pods ...*v1.Pod) podsource.Snapshot { return podsource.Snapshot{Pods: pods} }

func rejectedReasons(s desiredSet) map[string]string {
	out := map[string]string{}
	for k, e := range s {
		if e.rejected != nil {
			out[k] = e.rejected.Reason + ": " + e.rejected.Message
		}
	}
	return out
}

func TestAdmitInOrderAgainstWhatEarlierPodsHold(t *testing.T) {
	a := testAdmitter()
	// b and c are named after a: a batch is admitted by name, so a and b
	// take the two pod slots whatever order the snapshot lists them in.
	next := desiredFrom(snapshot(sized("c", "3", ""), sized("a", "1", ""), sized("b", "2", "")), nil)
	if jobs := a.admit(next, nil, env(testNode("4", 2), nil, nil)); len(jobs) != 0 {
		t.Fatalf("preemptions %v for ordinary pods", jobs)
	}
	want := map[string]string{"default/c": "OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"}
	if got := rejectedReasons(next); !maps.Equal(got, want) {
		t.Errorf("rejected %v, want %v", got, want)
	}
	// c stays rejected when a slot frees: a pod is decided once.
	a.prune(next, func(types.UID) bool { return false })
	later := desiredFrom(snapshot(sized("c", "3", ""), sized("b", "2", "")), next)
	a.admit(later, next, env(testNode("4", 2), nil, nil))
	if later["default/c"].rejected == nil {
		t.Error("a rejected pod was admitted on a later pass")
	}
	// A new pod takes the slot a left.
	last := desiredFrom(snapshot(sized("b", "2", ""), sized("d", "4", "")), later)
	a.prune(later, func(types.UID) bool { return false })
	a.admit(last, later, env(testNode("4", 2), nil, nil))
	if got := rejectedReasons(last); len(got) != 0 {
		t.Errorf("rejected %v, want d admitted into the slot a freed", got)
	}
}

func TestAdmitCountsWhatHoldsResources(t *testing.T) {
	tests := []struct {
		name     string
		prev     []*v1.Pod // admitted first
		terminal []types.UID
		adopted  []types.UID
		stopping []types.UID // no longer desired, still being stopped
		next     []*v1.Pod
		rejected map[string]string
	}{
		{
			name:     "requests of running pods count",
			prev:     []*v1.Pod{sized("a", "1", "1500m")},
			next:     []*v1.Pod{sized("a", "1", "1500m"), sized("b", "2", "1")},
			rejected: map[string]string{"default/b": "OutOfcpu: Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"},
		},
		{
			name:     "a completed or evicted pod holds nothing",
			prev:     []*v1.Pod{sized("a", "1", "1500m")},
			terminal: []types.UID{"1"},
			next:     []*v1.Pod{sized("a", "1", "1500m"), sized("b", "2", "1")},
		},
		{
			name:     "a pod being stopped holds what it had until it has stopped",
			prev:     []*v1.Pod{sized("a", "1", "1500m")},
			stopping: []types.UID{"1"},
			next:     []*v1.Pod{sized("b", "2", "1")},
			rejected: map[string]string{"default/b": "OutOfcpu: Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"},
		},
		{
			name: "a pod that has stopped holds nothing",
			prev: []*v1.Pod{sized("a", "1", "1500m")},
			next: []*v1.Pod{sized("b", "2", "1")},
		},
		{
			name: "an edited pod is not counted against the one it replaces",
			prev: []*v1.Pod{sized("a", "1", "1500m")},
			// Still being stopped, but replaced by its own new version.
			stopping: []types.UID{"1"},
			next:     []*v1.Pod{sized("a", "2", "1800m")},
		},
		{
			name:    "a pod running when berth started is admitted unchecked, and counts",
			adopted: []types.UID{"1"},
			next:    []*v1.Pod{sized("a", "1", "3"), sized("b", "2", "100m")},
			rejected: map[string]string{
				"default/b": "OutOfcpu: Node didn't have enough resource: cpu, requested: 100, used: 3000, capacity: 2000",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testAdmitter()
			node := testNode("2", 110)
			prev := desiredFrom(snapshot(tt.prev...), nil)
			a.admit(prev, nil, env(node, nil, nil))
			next := desiredFrom(snapshot(tt.next...), prev)
			a.prune(prev, func(uid types.UID) bool { return slices.Contains(tt.stopping, uid) })
			if len(tt.prev) > 0 {
				// The pass that drops a stopped pod is the one after it is
				// no longer desired.
				a.prune(next, func(uid types.UID) bool { return slices.Contains(tt.stopping, uid) })
			}
			a.admit(next, prev, env(node, tt.terminal, tt.adopted))
			if got := rejectedReasons(next); !maps.Equal(got, tt.rejected) {
				t.Errorf("rejected %v, want %v", got, tt.rejected)
			}
		})
	}
}

func TestAdmitCriticalPodPreempts(t *testing.T) {
	a := testAdmitter()
	node := testNode("2", 110)
	prev := desiredFrom(snapshot(sized("small", "1", "500m"), sized("big", "2", "1500m")), nil)
	a.admit(prev, nil, env(node, nil, nil))

	crit := critical(sized("crit", "3", "1"))
	next := desiredFrom(snapshot(sized("small", "1", "500m"), sized("big", "2", "1500m"), crit, sized("late", "4", "400m")), prev)
	jobs := a.admit(next, prev, env(node, nil, nil))
	// 1000m lacking: small (500m) is at distance 0.25, big (1500m) at 0.
	if len(jobs) != 1 || len(jobs[0].victims) != 1 || jobs[0].victims[0].Name != "big" {
		t.Fatalf("preemptions %+v, want crit preempting big", jobs)
	}
	if jobs[0].signal != v1.ResourceCPU {
		t.Errorf("signal %q, want cpu", jobs[0].signal)
	}
	if e := next["default/crit"]; e.rejected != nil || !slices.Equal(e.preempting, []types.UID{"2"}) {
		t.Errorf("crit: rejected %v, preempting %v; want admitted, waiting for big", e.rejected, e.preempting)
	}
	// late (400m) is admitted after the preemption: big holds nothing any
	// more, crit holds 1000m, small 500m.
	if e := next["default/late"]; e.rejected != nil {
		t.Errorf("late rejected: %s", e.rejected.Message)
	}
	if r, ok := a.result("3"); !ok || r.Preemption == nil || len(r.Preemption.Victims) != 1 {
		t.Errorf("crit's decision %+v does not explain the preemption", r)
	}
	if d := diff(prev, next); len(d.start) != 1 || d.start[0].Name != "late" {
		t.Errorf("started %v, want only late: crit waits for its victim", names(d.start))
	}
	a.preempted(jobs[0].victims)
	if a.victims["2"] {
		t.Error("big is still counted as a victim once the preemption is over")
	}
}

func TestAdmitCriticalPodThatCannotFit(t *testing.T) {
	a := testAdmitter()
	node := testNode("2", 110)
	static := sized("static", "1", "1500m")
	static.Annotations[v1helper.ConfigSourceAnnotationKey] = v1helper.FileSource
	prev := desiredFrom(snapshot(static), nil)
	a.admit(prev, nil, env(node, nil, nil))
	next := desiredFrom(snapshot(static, critical(sized("crit", "2", "1"))), prev)
	if jobs := a.admit(next, prev, env(node, nil, nil)); len(jobs) != 0 {
		t.Fatalf("preempted %+v: a static pod is critical and never a victim", jobs)
	}
	e := next["default/crit"]
	if e.rejected == nil || e.rejected.Reason != "UnexpectedAdmissionError" ||
		!strings.HasSuffix(e.rejected.Message, "no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]") {
		t.Errorf("crit: %+v, want UnexpectedAdmissionError naming the 500m no pod can free", e.rejected)
	}
}

// Admission sees a plugin's resource once the plugin is connected and has
// listed its devices: one that registered again after a restart of berth
// and has not listed them yet has none, and a pod checked against that
// would be refused for devices about to come (its worker waits for them).
func TestAdmissionDeviceResourcesOnlyOfConnectedPlugins(t *testing.T) {
	capacity, allocatable := admissionDeviceResources([]devicemanager.ResourceStatus{
		{Name: "example.com/widget", Capacity: 3, Allocatable: 2, Connected: true, Listed: true},
		{Name: "example.com/gadget", Capacity: 4, Allocatable: 0, Connected: false},
		{Name: "example.com/gizmo", Capacity: 0, Allocatable: 0, Connected: true, Listed: false},
	})
	w := v1.ResourceName("example.com/widget")
	if len(capacity) != 1 || capacity.Name(w, resource.DecimalSI).Value() != 3 || allocatable.Name(w, resource.DecimalSI).Value() != 2 {
		t.Errorf("capacity %v, allocatable %v: want only the widget, 3 and 2", capacity, allocatable)
	}
}

// A critical pod still waiting for its victims may itself be preempted by a
// more important one: it then never starts, and holds nothing.
func TestAdmitWaitingPreemptorPreempted(t *testing.T) {
	a := testAdmitter()
	node := testNode("2", 110)
	prev := desiredFrom(snapshot(sized("big", "1", "2")), nil)
	a.admit(prev, nil, env(node, nil, nil))

	cluster := sized("cluster", "2", "2")
	cluster.Spec.Priority = ptr.To(v1helper.SystemCriticalPriority)
	mid := desiredFrom(snapshot(sized("big", "1", "2"), cluster), prev)
	if jobs := a.admit(mid, prev, env(node, nil, nil)); len(jobs) != 1 {
		t.Fatalf("%d preemptions, want cluster preempting big", len(jobs))
	}

	// While big is stopping, a node-critical pod needs the room cluster
	// was promised: cluster (lower priority) is its victim.
	next := desiredFrom(snapshot(sized("big", "1", "2"), cluster, critical(sized("node", "3", "2"))), mid)
	jobs := a.admit(next, mid, env(node, nil, nil))
	if len(jobs) != 1 || len(jobs[0].victims) != 1 || jobs[0].victims[0].Name != "cluster" {
		t.Fatalf("preemptions %+v, want node preempting cluster", jobs)
	}
	e := next["default/cluster"]
	if e.rejected == nil || e.rejected.Reason != reasonPreempting || len(e.preempting) != 0 {
		t.Errorf("cluster: rejected %v, preempting %v; want preempted, never to start", e.rejected, e.preempting)
	}
	if r, _ := a.result("2"); r.Admit || r.Reason != reasonPreempting {
		t.Errorf("cluster's decision %+v still reads as admitted", r)
	}
	if _, held := a.admitted["2"]; held {
		t.Error("the preempted waiting pod still counts as admitted")
	}
}

// recordingStatuses is a status manager and event recorder for publish.
type recordingStatuses struct {
	set    map[types.UID]v1.PodStatus
	events []string
}

func (r *recordingStatuses) Set(pod *v1.Pod, st v1.PodStatus) { r.set[pod.UID] = st }
func (r *recordingStatuses) Event(pod *v1.Pod, _, reason, _ string) {
	r.events = append(r.events, pod.Name+" "+reason)
}

// TestPublishRejections checks that a rejection is written once, through
// the rejecter, and forgotten with the pod.
func TestPublishRejections(t *testing.T) {
	rec := &recordingStatuses{set: map[types.UID]v1.PodStatus{}}
	a := newAdmitter(lifecycle.NewPipeline(nil, nil, lifecycle.NodeFeatures{}),
		lifecycle.Rejecter{Status: rec, Events: rec, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		func(uid types.UID) { delete(rec.set, uid) }, nil)
	node := testNode("2", 110)
	first := desiredFrom(snapshot(sized("a", "1", "1500m"), sized("b", "2", "1")), nil)
	a.admit(first, nil, env(node, nil, nil))
	a.publish(first, nil)
	want := "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"
	if st := rec.set["2"]; st.Phase != v1.PodFailed || st.Reason != "OutOfcpu" || st.Message != want {
		t.Errorf("b's status %+v, want Failed OutOfcpu %q", st, want)
	}
	// A later pass neither writes nor records it again.
	again := desiredFrom(snapshot(sized("a", "1", "1500m"), sized("b", "2", "1")), first)
	a.admit(again, first, env(node, nil, nil))
	a.publish(again, first)
	if !slices.Equal(rec.events, []string{"b OutOfcpu"}) || len(rec.set) != 1 {
		t.Errorf("events %v, statuses %v; want one OutOfcpu for b", rec.events, rec.set)
	}
	// b's manifest removed: its status goes.
	gone := desiredFrom(snapshot(sized("a", "1", "1500m")), again)
	a.admit(gone, again, env(node, nil, nil))
	a.publish(gone, again)
	if len(rec.set) != 0 {
		t.Errorf("statuses %v left of a pod no longer wanted", rec.set)
	}
}

// TestForgetStatusKeepsWantedRejections checks that the status sync cannot
// forget the rejection of a pod still wanted, but forgets any other.
func TestForgetStatusKeepsWantedRejections(t *testing.T) {
	statuses := status.NewManager()
	rejected, gone := sized("rejected", "1", ""), sized("gone", "2", "")
	desired := desiredFrom(snapshot(rejected), nil)
	desired["default/rejected"].rejected = &admission.Result{Reason: "OutOfcpu"}
	v := newPodView(statuses, clock.RealClock{}, t.TempDir())
	v.snap.Store(&podSnapshot{desired: map[string]podEntry{"default/rejected": *desired["default/rejected"]}})
	statuses.Set(rejected, lifecycle.RejectedStatus("OutOfcpu", "cpu"))
	statuses.Set(gone, v1.PodStatus{Phase: v1.PodSucceeded})
	v.forgetStatus("1")
	v.forgetStatus("2")
	if _, ok := statuses.Get("1"); !ok {
		t.Error("the rejection of a pod still wanted was forgotten")
	}
	if _, ok := statuses.Get("2"); ok {
		t.Error("the status of a pod no longer wanted was kept")
	}
}
