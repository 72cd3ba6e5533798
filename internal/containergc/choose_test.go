package containergc

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	ready   = runtimeapi.PodSandboxState_SANDBOX_READY
	dead    = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

// ctr is container "<pod>/<name>" created age ago, in sandbox "<pod>-sb".
func ctr(id, podAndName string, state runtimeapi.ContainerState, age time.Duration) Container {
	pod, name, _ := strings.Cut(podAndName, "/")
	return Container{ID: id, PodUID: types.UID(pod), Name: name, SandboxID: pod + "-sb", State: state, CreatedAt: now.Add(-age)}
}

func in(c Container, sandboxID string) Container {
	c.SandboxID = sandboxID
	return c
}

func sb(id, pod string, state runtimeapi.PodSandboxState, age time.Duration) Sandbox {
	return Sandbox{ID: id, PodUID: types.UID(pod), State: state, CreatedAt: now.Add(-age)}
}

// pods is a PodState: pods in the map are wanted or terminal; any other is
// gone, as for the kubelet once its sources are ready.
type pods map[types.UID]phase

type phase int

const (
	wanted phase = iota + 1
	terminal
)

func (p pods) ShouldPodContentBeRemoved(uid types.UID) bool {
	_, known := p[uid]
	return !known
}

func (p pods) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	ph, known := p[uid]
	return !known || ph == terminal
}

// unasked fails the test when asked: before the sources are ready, nothing
// may depend on what is known of the pods.
type unasked struct{ t *testing.T }

func (u unasked) ShouldPodContentBeRemoved(uid types.UID) bool {
	u.t.Errorf("asked whether the content of pod %s should be removed before the sources are ready", uid)
	return true
}

func (u unasked) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	u.t.Errorf("asked whether the runtime of pod %s should be removed before the sources are ready", uid)
	return true
}

func noLimits() Policy { return Policy{MaxPerPodContainer: -1, MaxContainers: -1} }

func TestChoose(t *testing.T) {
	h := time.Hour
	tests := []struct {
		name       string
		policy     *Policy // nil: DefaultPolicy
		containers []Container
		sandboxes  []Sandbox
		logDirs    []string
		pods       pods
		notReady   bool // the sources
		reclaim    bool
		// IDs and names, in any order.
		wantContainers, wantSandboxes, wantLogDirs []string
	}{
		{
			name:   "running containers are never removed",
			policy: &Policy{MaxPerPodContainer: 0, MaxContainers: 0},
			containers: []Container{
				ctr("g1", "gone/app", running, 3*h), ctr("a1", "a/app", running, 2*h), ctr("a2", "a/app", exited, h),
			},
			pods:           pods{"a": wanted},
			wantContainers: []string{"a2"},
		},
		{
			name: "each container of each pod keeps its newest dead instance by default",
			containers: []Container{
				ctr("a1", "a/app", exited, 3*h), ctr("a3", "a/app", exited, h), ctr("a2", "a/app", exited, 2*h),
				ctr("s1", "a/side", exited, 2*h), ctr("s2", "a/side", exited, h),
				ctr("b1", "b/app", exited, 5*h),
				ctr("r1", "a/app", running, 10*time.Minute),
			},
			pods:           pods{"a": wanted, "b": wanted},
			wantContainers: []string{"a1", "a2", "s1"},
		},
		{
			name: "created and unknown containers are dead",
			containers: []Container{
				ctr("a1", "a/app", created, 2*h), ctr("a2", "a/app", unknown, h), ctr("a3", "a/app", exited, 3*h),
			},
			pods:           pods{"a": wanted},
			wantContainers: []string{"a1", "a3"},
		},
		{
			name:   "dead containers younger than the minimum age are kept, and do not count",
			policy: &Policy{MinAge: h, MaxPerPodContainer: 1, MaxContainers: -1},
			containers: []Container{
				ctr("a1", "a/app", exited, 3*h), ctr("a2", "a/app", exited, 2*h), ctr("a3", "a/app", exited, h),
				ctr("a4", "a/app", exited, 30*time.Minute), ctr("a5", "a/app", exited, time.Minute),
			},
			pods: pods{"a": wanted},
			// a3 is exactly the minimum age: old enough, and the newest of
			// those that are.
			wantContainers: []string{"a1", "a2"},
		},
		{
			name:   "no limit keeps every dead container",
			policy: ptr(noLimits()),
			containers: []Container{
				ctr("a1", "a/app", exited, 3*h), ctr("a2", "a/app", exited, 2*h), ctr("a3", "a/app", exited, h),
			},
			pods: pods{"a": wanted},
		},
		{
			name:   "a per-container limit of 0 removes every dead container",
			policy: &Policy{MaxPerPodContainer: 0, MaxContainers: -1},
			containers: []Container{
				ctr("a1", "a/app", exited, 3*h), ctr("a2", "a/app", exited, 2*h), ctr("b1", "b/app", exited, h),
				ctr("b2", "b/app", running, h),
			},
			pods:           pods{"a": wanted, "b": wanted},
			wantContainers: []string{"a1", "a2", "b1"},
		},
		{
			name:   "a per-container limit of 2 keeps the two newest",
			policy: &Policy{MaxPerPodContainer: 2, MaxContainers: -1},
			containers: []Container{
				ctr("a1", "a/app", exited, 4*h), ctr("a2", "a/app", exited, 3*h), ctr("a3", "a/app", exited, 2*h),
				ctr("a4", "a/app", exited, h), ctr("b1", "b/app", exited, 9*h),
			},
			pods:           pods{"a": wanted, "b": wanted},
			wantContainers: []string{"a1", "a2"},
		},
		{
			name:   "over the node limit, each unit keeps an even share",
			policy: &Policy{MaxPerPodContainer: -1, MaxContainers: 4},
			containers: []Container{
				ctr("a1", "a/app", exited, 4*h), ctr("a2", "a/app", exited, 3*h), ctr("a3", "a/app", exited, 2*h),
				ctr("a4", "a/app", exited, h), ctr("b1", "b/app", exited, 6*h), ctr("b2", "b/app", exited, 5*h),
			},
			pods: pods{"a": wanted, "b": wanted},
			// Two each, though b's are the oldest.
			wantContainers: []string{"a1", "a2"},
		},
		{
			name:   "over the node limit, each unit keeps at least one, then the oldest go",
			policy: &Policy{MaxPerPodContainer: -1, MaxContainers: 2},
			containers: []Container{
				ctr("a1", "a/app", exited, 5*h), ctr("a2", "a/app", exited, h),
				ctr("b1", "b/app", exited, 4*h), ctr("b2", "b/app", exited, 2*h),
				ctr("c1", "c/app", exited, 3*h), ctr("c2", "c/app", exited, 30*time.Minute),
			},
			pods: pods{"a": wanted, "b": wanted, "c": wanted},
			// 2/3 units rounds to 0, so one each; of a2, b2, c2 the oldest
			// goes.
			wantContainers: []string{"a1", "b1", "c1", "b2"},
		},
		{
			name:   "under the node limit, only the per-container limit applies",
			policy: &Policy{MaxPerPodContainer: 1, MaxContainers: 10},
			containers: []Container{
				ctr("a1", "a/app", exited, 2*h), ctr("a2", "a/app", exited, h), ctr("b1", "b/app", exited, h),
			},
			pods:           pods{"a": wanted, "b": wanted},
			wantContainers: []string{"a1"},
		},
		{
			name:   "a node limit of 0 removes every dead container",
			policy: &Policy{MaxPerPodContainer: -1, MaxContainers: 0},
			containers: []Container{
				ctr("a1", "a/app", exited, 2*h), ctr("a2", "a/app", exited, h), ctr("b1", "b/app", exited, h),
				ctr("b2", "b/app", running, h),
			},
			pods:           pods{"a": wanted, "b": wanted},
			wantContainers: []string{"a1", "a2", "b1"},
		},
		{
			name:   "the node limit applies after the per-container limit",
			policy: &Policy{MaxPerPodContainer: 1, MaxContainers: 1},
			containers: []Container{
				ctr("a1", "a/app", exited, 4*h), ctr("a2", "a/app", exited, 2*h),
				ctr("b1", "b/app", exited, 3*h), ctr("b2", "b/app", exited, h),
			},
			pods:           pods{"a": wanted, "b": wanted},
			wantContainers: []string{"a1", "b1", "a2"},
		},
		{
			name:   "units of gone pods do not count in the even share",
			policy: &Policy{MaxPerPodContainer: -1, MaxContainers: 2},
			containers: []Container{
				ctr("g1", "gone/app", exited, 5*h), ctr("g2", "gone/app", exited, 4*h),
				ctr("a1", "a/app", exited, 3*h), ctr("a2", "a/app", exited, 2*h), ctr("a3", "a/app", exited, h),
			},
			pods:           pods{"a": wanted},
			wantContainers: []string{"g1", "g2", "a1"},
		},
		{
			name:   "a gone pod loses every dead container old enough",
			policy: &Policy{MinAge: h, MaxPerPodContainer: 1, MaxContainers: -1},
			containers: []Container{
				ctr("g1", "gone/app", exited, 3*h), ctr("g2", "gone/app", exited, 2*h), ctr("s1", "gone/side", exited, 2*h),
				ctr("g3", "gone/app", running, 3*h), ctr("g4", "gone/app", exited, time.Minute),
			},
			wantContainers: []string{"g1", "g2", "s1"},
		},
		{
			name: "before the sources are ready, a pod that looks gone keeps its newest",
			containers: []Container{
				ctr("g1", "gone/app", exited, 3*h), ctr("g2", "gone/app", exited, 2*h),
			},
			notReady:       true,
			wantContainers: []string{"g1"},
		},
		{
			name: "a terminal pod keeps its newest dead container in the periodic pass",
			containers: []Container{
				ctr("t1", "t/app", exited, 3*h), ctr("t2", "t/app", exited, 2*h),
			},
			pods:           pods{"t": terminal},
			wantContainers: []string{"t1"},
		},
		{
			name: "a terminal pod loses every dead container when reclaiming",
			containers: []Container{
				ctr("t1", "t/app", exited, 3*h), ctr("t2", "t/app", exited, 2*h), ctr("a1", "a/app", exited, 3*h),
				ctr("a2", "a/app", exited, 2*h),
			},
			pods:           pods{"t": terminal, "a": wanted},
			reclaim:        true,
			wantContainers: []string{"t1", "t2", "a1"},
		},
		{
			name:   "containers without a pod UID are never removed",
			policy: &Policy{MaxPerPodContainer: 0, MaxContainers: 0},
			containers: []Container{
				{ID: "x1", Name: "app", SandboxID: "x-sb", State: exited, CreatedAt: now.Add(-h)},
			},
		},

		// Sandboxes.
		{
			name: "a pod keeps its newest sandbox",
			sandboxes: []Sandbox{
				sb("s1", "a", dead, 3*h), sb("s3", "a", dead, h), sb("s2", "a", dead, 2*h), sb("b1", "b", dead, 9*h),
			},
			pods:          pods{"a": wanted, "b": wanted},
			wantSandboxes: []string{"s1", "s2"},
		},
		{
			name:      "a pod keeps its newest sandbox even when an older one is ready",
			sandboxes: []Sandbox{sb("s1", "a", ready, 3*h), sb("s2", "a", dead, h)},
			pods:      pods{"a": wanted},
		},
		{
			name:      "ready sandboxes are never removed",
			sandboxes: []Sandbox{sb("s1", "gone", ready, 3*h), sb("s2", "gone", ready, h)},
		},
		{
			name: "a sandbox goes when its last container goes in the same pass",
			containers: []Container{
				in(ctr("a1", "a/app", exited, 170*time.Minute), "s1"),
				in(ctr("a2", "a/app", exited, 110*time.Minute), "s2"),
			},
			sandboxes: []Sandbox{
				sb("s1", "a", dead, 3*h), sb("s2", "a", dead, 2*h), sb("s3", "a", dead, h),
			},
			pods:           pods{"a": wanted},
			wantContainers: []string{"a1"},
			wantSandboxes:  []string{"s1"},
		},
		{
			name: "a gone pod loses every sandbox it has no container left in",
			containers: []Container{
				in(ctr("g1", "gone/app", exited, 2*h), "s1"),
				in(ctr("g2", "gone/app", exited, h), "s2"),
			},
			sandboxes: []Sandbox{
				sb("s1", "gone", dead, 3*h), sb("s2", "gone", dead, 2*h), sb("s3", "gone", ready, h),
			},
			wantContainers: []string{"g1", "g2"},
			wantSandboxes:  []string{"s1", "s2"},
		},
		{
			name:       "a container too young to go keeps its sandbox",
			policy:     &Policy{MinAge: h, MaxPerPodContainer: 1, MaxContainers: -1},
			containers: []Container{in(ctr("g1", "gone/app", exited, time.Minute), "s1")},
			sandboxes:  []Sandbox{sb("s1", "gone", dead, 3*h)},
		},
		{
			name:       "another client's container keeps its sandbox",
			containers: []Container{{ID: "x1", SandboxID: "s1", State: exited, CreatedAt: now.Add(-h)}},
			sandboxes:  []Sandbox{sb("s1", "gone", dead, 3*h)},
		},
		{
			name:      "sandboxes without a pod UID are never removed",
			sandboxes: []Sandbox{sb("s1", "", dead, 3*h), sb("s2", "", dead, 2*h)},
		},
		{
			name:          "before the sources are ready, a pod that looks gone keeps its newest sandbox",
			sandboxes:     []Sandbox{sb("s1", "gone", dead, 3*h), sb("s2", "gone", dead, h)},
			notReady:      true,
			wantSandboxes: []string{"s1"},
		},
		{
			name:          "a terminal pod keeps its newest sandbox in the periodic pass",
			sandboxes:     []Sandbox{sb("s1", "t", dead, 3*h), sb("s2", "t", dead, h)},
			pods:          pods{"t": terminal},
			wantSandboxes: []string{"s1"},
		},
		{
			name:          "a terminal pod loses every dead sandbox when reclaiming",
			sandboxes:     []Sandbox{sb("s1", "t", dead, 3*h), sb("s2", "t", dead, h), sb("a1", "a", dead, h)},
			pods:          pods{"t": terminal, "a": wanted},
			reclaim:       true,
			wantSandboxes: []string{"s1", "s2"},
		},

		// Pod log directories.
		{
			name: "the log directory of a gone pod goes once it has no sandbox left",
			containers: []Container{
				in(ctr("g1", "gone/app", exited, 2*h), "s1"),
			},
			sandboxes:      []Sandbox{sb("s1", "gone", dead, 3*h)},
			logDirs:        []string{"default_web_gone", "default_old_gone2", "default_api_a"},
			pods:           pods{"a": wanted},
			wantContainers: []string{"g1"},
			wantSandboxes:  []string{"s1"},
			wantLogDirs:    []string{"default_web_gone", "default_old_gone2"},
		},
		{
			name:      "the log directory of a gone pod with a sandbox left stays",
			sandboxes: []Sandbox{sb("s1", "gone", ready, 3*h)},
			logDirs:   []string{"default_web_gone"},
		},
		{
			name:       "the log directory of a gone pod with a container left stays",
			containers: []Container{ctr("g1", "gone/app", running, 2*h)},
			logDirs:    []string{"default_web_gone"},
		},
		{
			name:    "the log directory of a wanted pod stays",
			logDirs: []string{"default_web_a"},
			pods:    pods{"a": wanted},
		},
		{
			name:    "the log directory of a terminal pod stays, even when reclaiming",
			logDirs: []string{"default_web_t"},
			pods:    pods{"t": terminal},
			reclaim: true,
		},
		{
			name:     "no log directory goes before the sources are ready",
			logDirs:  []string{"default_web_gone"},
			notReady: true,
		},
		{
			name:    "directories not named like a pod's are left alone",
			logDirs: []string{"backup", "default_web", "a_b_c_d", "default__uid", "_web_uid", "default_web_"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			if tt.policy != nil {
				p = *tt.policy
			}
			var state PodState = tt.pods
			if tt.notReady {
				state = unasked{t}
			}
			plan := Choose(Input{
				Containers: tt.containers, Sandboxes: tt.sandboxes, PodLogDirs: tt.logDirs,
				Now: now, Policy: p, AllSourcesReady: !tt.notReady, EvictNonDeletedPods: tt.reclaim, Pods: state,
			})
			var gotC, gotS, gotL []string
			for _, c := range plan.Containers {
				gotC = append(gotC, c.ID)
			}
			for _, s := range plan.Sandboxes {
				gotS = append(gotS, s.ID)
			}
			for _, d := range plan.PodLogDirs {
				gotL = append(gotL, d.Name)
			}
			checkSet(t, "containers", gotC, tt.wantContainers)
			checkSet(t, "sandboxes", gotS, tt.wantSandboxes)
			checkSet(t, "pod log directories", gotL, tt.wantLogDirs)
		})
	}
}

func checkSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("removed %s %q, want %q", what, got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// The plan lists removals oldest first, each with why, and a log directory
// with its pod's UID.
func TestChoosePlan(t *testing.T) {
	h := time.Hour
	plan := Choose(Input{
		Containers: []Container{
			ctr("a3", "a/app", exited, h), ctr("a1", "a/app", exited, 3*h), ctr("a2", "a/app", exited, 2*h),
			in(ctr("g1", "gone/app", exited, 150*time.Minute), "gs1"),
			in(ctr("t1", "t/app", exited, 270*time.Minute), "ts1"), in(ctr("t2", "t/app", exited, 30*time.Minute), "ts2"),
			ctr("b1", "b/app", exited, 5*h), ctr("b2", "b/app", exited, 4*h), ctr("b3", "b/app", exited, 10*time.Minute),
		},
		Sandboxes: []Sandbox{
			sb("as1", "a", dead, 9*h), sb("a-sb", "a", ready, h),
			sb("gs1", "gone", dead, 3*h),
			sb("ts1", "t", dead, 5*h), sb("ts2", "t", dead, h),
		},
		PodLogDirs:          []string{"ns_g_gone", "ns_a_a"},
		Now:                 now,
		Policy:              Policy{MaxPerPodContainer: 2, MaxContainers: 3},
		AllSourcesReady:     true,
		EvictNonDeletedPods: true,
		Pods:                pods{"a": wanted, "b": wanted, "t": terminal},
	})
	perContainer := `at most 2 dead instances of container "app" are kept per pod (maximum-dead-containers-per-container)`
	perNode := "the node keeps at most 3 dead containers (maximum-dead-containers)"
	// t and gone go whole; a and b keep 2 each, then 1 each (3 for 2
	// units), which is under the node limit.
	wantC := []string{
		"b1: " + perContainer,
		"t1: " + reasonPodTerminated,
		"b2: " + perNode,
		"a1: " + perContainer,
		"g1: " + reasonPodRemoved,
		"a2: " + perNode,
		"t2: " + reasonPodTerminated,
	}
	var gotC []string
	for _, c := range plan.Containers {
		gotC = append(gotC, c.ID+": "+c.Reason)
	}
	if !slices.Equal(gotC, wantC) {
		t.Errorf("containers:\n got %q\nwant %q", gotC, wantC)
	}
	wantS := []string{"as1: " + reasonOldSandbox, "ts1: " + reasonPodTerminated, "gs1: " + reasonPodRemoved, "ts2: " + reasonPodTerminated}
	var gotS []string
	for _, s := range plan.Sandboxes {
		gotS = append(gotS, s.ID+": "+s.Reason)
	}
	if !slices.Equal(gotS, wantS) {
		t.Errorf("sandboxes:\n got %q\nwant %q", gotS, wantS)
	}
	if want := []PodLogDir{{Name: "ns_g_gone", PodUID: "gone"}}; !slices.Equal(plan.PodLogDirs, want) {
		t.Errorf("pod log directories = %v, want %v", plan.PodLogDirs, want)
	}
}

// Each pod is asked about once per pass, however many containers and
// sandboxes it has.
func TestChooseAsksOncePerPod(t *testing.T) {
	counting := &countingPods{pods: pods{"a": wanted}, asked: map[string]int{}}
	var cs []Container
	var sbs []Sandbox
	for i := range 5 {
		id := string(rune('0' + i))
		cs = append(cs, ctr("a"+id, "a/app", exited, time.Duration(i)*time.Hour), ctr("g"+id, "gone/c"+id, exited, time.Hour))
		sbs = append(sbs, sb("as"+id, "a", dead, time.Duration(i)*time.Hour))
	}
	Choose(Input{Containers: cs, Sandboxes: sbs, PodLogDirs: []string{"ns_web_gone", "ns_web_a"}, Now: now, Policy: DefaultPolicy(),
		AllSourcesReady: true, EvictNonDeletedPods: true, Pods: counting})
	want := map[string]int{"content a": 1, "runtime a": 1, "content gone": 1}
	if !maps.Equal(counting.asked, want) {
		t.Errorf("asked %v, want %v", counting.asked, want)
	}
}

type countingPods struct {
	pods  pods
	asked map[string]int // "content <uid>" or "runtime <uid>"
}

func (c *countingPods) ShouldPodContentBeRemoved(uid types.UID) bool {
	c.asked["content "+string(uid)]++
	return c.pods.ShouldPodContentBeRemoved(uid)
}

func (c *countingPods) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	c.asked["runtime "+string(uid)]++
	return c.pods.ShouldPodRuntimeBeRemoved(uid)
}
