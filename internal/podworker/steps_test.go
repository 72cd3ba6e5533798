package podworker

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
)

func stepNames(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.String())
	}
	return out
}

// The steps of a plan are in the kubelet's SyncPod order; only a regular
// init container's failure holds back the steps after it.
func TestPlanSteps(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "init"}, {Name: "side", RestartPolicy: &always}},
		Containers:          []v1.Container{{Name: "a"}, {Name: "b"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
	}}
	tests := []struct {
		name   string
		plan   Plan
		want   []string
		blocks []string
	}{
		{name: "idle", plan: Plan{}},
		{name: "kill the pod only", plan: Plan{KillPod: true}, want: []string{"KillPod"}},
		{
			name: "new sandbox, first init container",
			plan: Plan{KillPod: true, CreateSandbox: true, StartInit: []int{0}},
			want: []string{"KillPod", "PrepareSandbox", "CreateSandbox", "StartContainer init"}, blocks: []string{"init"},
		},
		{
			name: "everything at once",
			plan: Plan{
				StartEphemeral: []int{0}, StartInit: []int{1}, Start: []int{0, 1},
				Kill: []Kill{{ID: "x", Name: "a", Reason: "container spec changed"}},
			},
			want: []string{"PrepareSandbox", "KillContainer a", "StartContainer debug", "StartContainer side", "StartContainer a", "StartContainer b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := tt.plan.Steps(pod)
			if got := stepNames(steps); !slices.Equal(got, tt.want) {
				t.Errorf("steps %q, want %q", got, tt.want)
			}
			var blocks []string
			for _, s := range steps {
				if s.blocks() {
					blocks = append(blocks, s.Container.Name)
				}
			}
			if !slices.Equal(blocks, tt.blocks) {
				t.Errorf("blocking steps %q, want %q", blocks, tt.blocks)
			}
		})
	}
}

// gateStart decides a start from the back-offs, the clock and the
// snapshot alone: a container that exited waits out its crash-loop delay,
// a failed pull its pull delay, and anything else goes on.
func TestGateStart(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}}
	c := &v1.Container{Name: "app", Image: "busybox"}
	exited := &container.PodStatus{Containers: []container.ContainerStatus{
		{Name: "app", ID: "c1", State: container.StateExited, ExitCode: 1, FinishedAt: t0},
	}}
	tests := []struct {
		name string
		// restarted records a restart in the crash-loop back-off at t0,
		// pullFailed a failed pull.
		restarted, pullFailed bool
		st                    *container.PodStatus
		after                 time.Duration
		wantWait              time.Duration
		wantReason, wantEvent string
	}{
		{name: "never ran", st: &container.PodStatus{}},
		{name: "first exit restarts at once", st: exited},
		{
			name: "second exit waits", restarted: true, st: exited, after: 4 * time.Second,
			wantWait: 6 * time.Second, wantReason: reasonCrashLoopBackOff,
			wantEvent: "Warning BackOff Back-off restarting failed container app in pod web_ns(u1)",
		},
		{name: "the wait expires", restarted: true, st: exited, after: 10 * time.Second},
		{
			name: "a failed pull waits", pullFailed: true, st: &container.PodStatus{}, after: time.Second,
			wantWait: 10 * time.Second, wantReason: reasonImagePullBackOff,
			wantEvent: `Normal BackOff Back-off pulling image "busybox"`,
		},
		{name: "the pull wait expires", pullFailed: true, st: &container.PodStatus{}, after: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			crash, pull := NewBackOff(clk), NewBackOff(clk)
			if tt.restarted {
				crash.Next(backOffKey(pod, c), t0)
			}
			if tt.pullFailed {
				pull.Next(pullKey(pod, c), t0)
			}
			clk.Step(tt.after)
			g := gateStart(crash, pull, clk.Now(), pod, c, tt.st)
			if tt.wantReason == "" {
				if g != nil {
					t.Fatalf("gate %+v, want the start to go on", g)
				}
				return
			}
			if g == nil {
				t.Fatal("the start goes on; want a wait")
			}
			if g.wait != tt.wantWait || g.waiting.Reason != tt.wantReason {
				t.Errorf("wait %v (%s), want %v (%s)", g.wait, g.waiting.Reason, tt.wantWait, tt.wantReason)
			}
			if got := g.eventType + " " + g.eventReason + " " + g.eventMessage; got != tt.wantEvent {
				t.Errorf("event %q, want %q", got, tt.wantEvent)
			}
		})
	}
}
