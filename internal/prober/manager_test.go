package prober

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/prober/probe"
)

func TestInitialResults(t *testing.T) {
	h := newHarness(t)
	h.runner.set("gated", Startup, outcome{res: probe.Failure, output: "not yet"})
	h.m.AddPod(pod("u1",
		container("plain", spec(10, 1, 3, 0), spec(10, 1, 3, 30), nil),
		container("gated", spec(10, 1, 3, 0), spec(10, 1, 3, 0), spec(10, 1, 3, 0))))

	// Before a container exists, nothing is known about it.
	h.runDue()
	h.wantLiveness("a", Unknown, false)
	h.wantReady("a", false)

	h.statuses.set("u1", runningStatus(start, "plain", "a", "gated", "b"))
	h.advance(time.Second)
	h.wantLiveness("a", Success, true) // probed: Success
	h.wantReady("a", false)            // initial Failure: initialDelaySeconds 30 not passed
	if r, ok := h.m.Startup("b"); r != Unknown || !ok {
		t.Errorf("Startup(b) = %v, %v; want Unknown (not started), true", r, ok)
	}
	h.wantStarted("b", false)
	h.wantLiveness("b", Success, true) // initial Success, while gated
	h.wantReady("b", false)            // initial Failure, while gated
	h.wantCalls("plain", Readiness, 0)
	h.wantCalls("gated", Liveness, 0)
	h.wantCalls("gated", Readiness, 0)

	got := h.updates()
	for _, want := range []string{"a readiness Failure", "a liveness Success", "b startup Unknown", "b readiness Failure", "b liveness Success"} {
		if !slices.Contains(got, want) {
			t.Errorf("updates %q lack %q", got, want)
		}
	}
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	h := newHarness(t)
	h.runner.set("app", Startup, outcome{res: probe.Failure, output: "connection refused"})
	h.m.AddPod(pod("u1", container("app", spec(1, 1, 3, 0), spec(1, 1, 3, 0), spec(1, 1, 5, 0))))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))

	h.advance(3 * time.Second)
	if n := h.runner.count("app", Startup); n < 3 {
		t.Fatalf("startup probes = %d, want >= 3", n)
	}
	h.wantCalls("app", Liveness, 0)
	h.wantCalls("app", Readiness, 0)
	h.wantStarted("c1", false)
	h.wantReady("c1", false)

	// The startup probe succeeds: the container has started, and liveness
	// and readiness run at once, without waiting for their next period.
	h.runner.set("app", Startup, outcome{res: probe.Success})
	h.advance(time.Second)
	h.wantStarted("c1", true)
	h.wantCalls("app", Liveness, 1)
	h.wantCalls("app", Readiness, 1)
	h.wantReady("c1", true)

	// Started is final for this container: no more startup probes.
	n := h.runner.count("app", Startup)
	h.advance(5 * time.Second)
	h.wantCalls("app", Startup, n)
}

func TestLivenessFailureHoldsUntilANewContainer(t *testing.T) {
	h := newHarness(t)
	h.runner.set("app", Liveness, outcome{res: probe.Failure, output: "HTTP probe failed with statuscode: 500"})
	h.m.AddPod(pod("u1", container("app", spec(1, 1, 2, 0), nil, nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))

	h.advance(500 * time.Millisecond) // first probe
	h.wantLiveness("c1", Success, true)
	h.advance(time.Second) // second failure: the threshold
	h.wantLiveness("c1", Failure, true)
	h.wantCalls("app", Liveness, 2)

	// On hold: the container will be restarted, no more probes of it.
	h.advance(5 * time.Second)
	h.wantCalls("app", Liveness, 2)

	want := event{v1.EventTypeWarning, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500"}
	if ev := h.recorder.all(); len(ev) != 2 || ev[0] != want || ev[1] != want {
		t.Errorf("events = %+v, want twice %+v", ev, want)
	}

	// The restarted container has a new ID: the worker starts over.
	h.runner.set("app", Liveness, outcome{res: probe.Success})
	h.statuses.set("u1", runningStatus(start.Add(7*time.Second), "app", "c2"))
	h.advance(2 * time.Second)
	h.wantLiveness("c2", Success, true)
	h.wantLiveness("c1", Unknown, false) // the old container's result is gone
	if n := h.runner.count("app", Liveness); n < 3 {
		t.Errorf("liveness probes = %d after the new container, want > 2", n)
	}
}

func TestFirstProbeRightAfterInitialDelay(t *testing.T) {
	h := newHarness(t)
	h.m.AddPod(pod("u1", container("app", nil, spec(10, 1, 3, 5), nil)))
	h.runDue()

	// The container starts 2s after the manager: its first probe is due at
	// exactly started+5s, not at a later period tick.
	started := start.Add(2 * time.Second)
	h.clk.SetTime(started)
	h.statuses.set("u1", runningStatus(started, "app", "c1"))
	h.m.AddPod(pod("u1", container("app", nil, spec(10, 1, 3, 5), nil))) // the next sync wakes the worker
	h.runDue()
	h.wantReady("c1", false)

	h.clk.SetTime(started.Add(5*time.Second - time.Millisecond))
	h.runDue()
	h.wantCalls("app", Readiness, 0)
	h.clk.SetTime(started.Add(5 * time.Second))
	h.runDue()
	h.wantCalls("app", Readiness, 1)
	h.wantReady("c1", true)

	// Later probes keep to the container's beat, one every periodSeconds.
	first := started.Add(5 * time.Second)
	second := slotAtOrAfter(first.Add(phase("c1", 10*time.Second)), 10*time.Second, first.Add(5*time.Second))
	h.clk.SetTime(second.Add(-time.Millisecond))
	h.runDue()
	h.wantCalls("app", Readiness, 1)
	h.clk.SetTime(second)
	h.runDue()
	h.wantCalls("app", Readiness, 2)
	h.clk.SetTime(second.Add(10 * time.Second))
	h.runDue()
	h.wantCalls("app", Readiness, 3)
}

func TestThresholds(t *testing.T) {
	h := newHarness(t)
	h.m.AddPod(pod("u1", container("app", nil, spec(1, 2, 3, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))

	h.advance(500 * time.Millisecond)
	h.wantReady("c1", false) // one success of two
	h.advance(time.Second)
	h.wantReady("c1", true)

	h.runner.set("app", Readiness, outcome{res: probe.Failure, output: "down"})
	h.advance(2 * time.Second)
	h.wantReady("c1", true) // two failures of three
	h.advance(time.Second)
	h.wantReady("c1", false)
}

func TestWarningCountsAsSuccess(t *testing.T) {
	h := newHarness(t)
	h.runner.set("app", Readiness, outcome{res: probe.Warning, output: "Probe terminated redirects"})
	h.m.AddPod(pod("u1", container("app", nil, spec(1, 1, 3, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(500 * time.Millisecond)
	h.wantReady("c1", true)
	want := event{v1.EventTypeWarning, "ProbeWarning", "Readiness probe warning: Probe terminated redirects"}
	if ev := h.recorder.all(); len(ev) != 1 || ev[0] != want {
		t.Errorf("events = %+v, want %+v", ev, want)
	}
}

func TestErroredProbeKeepsTheResult(t *testing.T) {
	h := newHarness(t)
	h.m.AddPod(pod("u1", container("app", nil, spec(1, 1, 1, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(500 * time.Millisecond)
	h.wantReady("c1", true)

	h.runner.set("app", Readiness, outcome{res: probe.Unknown, err: errors.New(`port "http" not found`)})
	h.advance(time.Second)
	h.wantReady("c1", true) // failureThreshold 1, yet still ready
	h.wantCalls("app", Readiness, 1+maxProbeRetries)
	ev := h.recorder.all()
	if len(ev) != 1 || ev[0].reason != "Unhealthy" || ev[0].message != `Readiness probe errored: port "http" not found` {
		t.Errorf("events = %+v", ev)
	}
}

func TestContainerNotRunning(t *testing.T) {
	h := newHarness(t)
	p := pod("u1", container("app", spec(1, 1, 3, 0), spec(1, 1, 3, 0), nil))
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	h.m.AddPod(p)
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(500 * time.Millisecond)
	h.wantReady("c1", true)

	st := runningStatus(start, "app", "c1")
	st.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	h.statuses.set("u1", st)
	h.advance(time.Second)
	h.wantReady("c1", false)
	h.wantLiveness("c1", Failure, true)
	// restartPolicy Never: the container will not come back, the workers end.
	if n := h.m.sched.len(); n != 0 {
		t.Errorf("%d workers still scheduled", n)
	}
}

func TestPodFinishedStopsWorkers(t *testing.T) {
	h := newHarness(t)
	h.m.AddPod(pod("u1", container("app", spec(1, 1, 3, 0), spec(1, 1, 3, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(500 * time.Millisecond)
	st := runningStatus(start, "app", "c1")
	st.Phase = v1.PodSucceeded
	h.statuses.set("u1", st)
	h.advance(2 * time.Second)
	if n := h.m.sched.len(); n != 0 {
		t.Errorf("%d workers still scheduled", n)
	}
	h.wantCalls("app", Liveness, 1)
}

func TestStopLivenessAndStartup(t *testing.T) {
	h := newHarness(t)
	h.runner.set("app", Liveness, outcome{res: probe.Failure, output: "dead"})
	h.runner.set("slow", Startup, outcome{res: probe.Failure, output: "starting"})
	p := pod("u1",
		container("app", spec(1, 1, 2, 0), spec(1, 1, 3, 0), nil),
		container("slow", nil, nil, spec(1, 1, 100, 0)))
	h.m.AddPod(p)
	h.statuses.set("u1", runningStatus(start, "app", "c1", "slow", "c2"))
	h.advance(1500 * time.Millisecond)
	h.wantLiveness("c1", Failure, true)
	h.wantReady("c1", true)

	h.m.StopLivenessAndStartup(p)
	h.wantLiveness("c1", Success, true) // nothing restarts a terminating container
	h.wantStarted("c2", true)
	h.wantReady("c1", false) // a terminating pod is not ready...

	// ...though its readiness probe keeps running; liveness and startup do not.
	live, startup, ready := h.runner.count("app", Liveness), h.runner.count("slow", Startup), h.runner.count("app", Readiness)
	h.m.AddPod(p) // the sync loop may still call AddPod: nothing restarts
	h.advance(3 * time.Second)
	h.wantCalls("app", Liveness, live)
	h.wantCalls("slow", Startup, startup)
	if n := h.runner.count("app", Readiness); n < ready+3 {
		t.Errorf("readiness probes = %d, want >= %d", n, ready+3)
	}
}

func TestDeletionTimestampStopsLivenessAndStartup(t *testing.T) {
	h := newHarness(t)
	h.runner.set("app", Startup, outcome{res: probe.Failure, output: "starting"})
	p := pod("u1", container("app", spec(1, 1, 3, 0), nil, spec(1, 1, 100, 0)))
	h.m.AddPod(p)
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(500 * time.Millisecond)
	h.wantStarted("c1", false)

	deleted := p.DeepCopy()
	deleted.DeletionTimestamp = &metav1.Time{Time: h.clk.Now()}
	h.m.AddPod(deleted)
	h.advance(time.Second)
	h.wantStarted("c1", true)
	h.wantLiveness("c1", Success, true)
	if n := h.m.sched.len(); n != 0 {
		t.Errorf("%d workers still scheduled", n)
	}
}

func TestRemoveAndCleanupPods(t *testing.T) {
	h := newHarness(t)
	p1 := pod("u1", container("a", spec(1, 1, 3, 0), spec(1, 1, 3, 0), nil))
	p2 := pod("u2", container("b", spec(1, 1, 3, 0), spec(1, 1, 3, 0), nil))
	p3 := pod("u3", container("c", nil, spec(1, 1, 3, 0), nil))
	for _, p := range []*v1.Pod{p1, p2, p3} {
		h.m.AddPod(p)
	}
	h.statuses.set("u1", runningStatus(start, "a", "c1"))
	h.statuses.set("u2", runningStatus(start, "b", "c2"))
	h.statuses.set("u3", runningStatus(start, "c", "c3"))
	h.advance(time.Second)
	for _, id := range []string{"c1", "c2", "c3"} {
		h.wantReady(id, true)
	}
	if got := h.series("prober_probe_total"); got != 5*3 {
		t.Errorf("%d probe_total series, want 15 (5 probes x 3 results)", got)
	}

	h.m.RemovePod(p3)
	h.m.CleanupPods(map[types.UID]bool{"u1": true})
	h.wantReady("c1", true)
	for _, id := range []string{"c2", "c3"} {
		h.wantReady(id, false)
		h.wantLiveness(id, Unknown, false)
	}
	calls := h.runner.count("b", Liveness)
	h.advance(3 * time.Second)
	h.wantCalls("b", Liveness, calls)
	if n := h.m.sched.len(); n != 2 {
		t.Errorf("%d workers scheduled, want the 2 of u1", n)
	}
	if got := h.series("prober_probe_total"); got != 2*3 {
		t.Errorf("%d probe_total series after cleanup, want 6", got)
	}
}

func TestSidecarsAreProbedInitContainersAreNot(t *testing.T) {
	h := newHarness(t)
	always := v1.ContainerRestartPolicyAlways
	p := pod("u1", container("app", nil, spec(1, 1, 3, 0), nil))
	p.Spec.InitContainers = []v1.Container{
		{Name: "setup", ReadinessProbe: spec(1, 1, 3, 0)},
		{Name: "proxy", ReadinessProbe: spec(1, 1, 3, 0), RestartPolicy: &always},
	}
	h.m.AddPod(p)
	st := runningStatus(start, "app", "c1")
	st.InitContainerStatuses = runningStatus(start, "setup", "i1", "proxy", "i2").ContainerStatuses
	h.statuses.set("u1", st)
	h.advance(time.Second)
	h.wantReady("i2", true)
	h.wantCalls("setup", Readiness, 0)
}

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	h.runner.set("app", Liveness, outcome{res: probe.Failure, output: "x"})
	h.m.AddPod(pod("u1", container("app", spec(1, 1, 100, 0), spec(1, 1, 3, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(2500 * time.Millisecond)
	failed := h.m.metrics.probes.WithLabelValues("Liveness", "failed", "app", "p-u1", "default", "u1")
	ok := h.m.metrics.probes.WithLabelValues("Readiness", "successful", "app", "p-u1", "default", "u1")
	if f, s := counterValue(t, failed), counterValue(t, ok); f != 3 || s != 3 {
		t.Errorf("failed liveness = %v, successful readiness = %v; want 3 and 3", f, s)
	}
	// Failures are not timed.
	if l, r := h.observations("Liveness"), h.observations("Readiness"); l != 0 || r != 3 {
		t.Errorf("timed probes: liveness %d, readiness %d; want 0 and 3", l, r)
	}
}

// TestProbesEndpointSeries checks the series /metrics/probes serves: the
// kubelet's labels, and none left of a removed pod.
func TestProbesEndpointSeries(t *testing.T) {
	h := newHarness(t)
	p := pod("u1", container("app", spec(1, 1, 100, 0), spec(1, 1, 3, 0), nil))
	h.m.AddPod(p)
	h.statuses.set("u1", runningStatus(start, "app", "c1"))
	h.advance(1500 * time.Millisecond)

	gathered := func() map[string][]string {
		families, err := h.m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				out[f.GetName()] = append(out[f.GetName()], strings.Join(ls, ","))
			}
		}
		return out
	}
	got := gathered()
	for _, tc := range []struct {
		family string
		want   string
	}{
		{"prober_probe_total", "container=app,namespace=default,pod=p-u1,pod_uid=u1,probe_type=Liveness,result=successful"},
		{"prober_probe_total", "container=app,namespace=default,pod=p-u1,pod_uid=u1,probe_type=Readiness,result=failed"},
		{"prober_probe_total", "container=app,namespace=default,pod=p-u1,pod_uid=u1,probe_type=Readiness,result=unknown"},
		{"prober_probe_duration_seconds", "container=app,namespace=default,pod=p-u1,probe_type=Readiness"},
	} {
		if !slices.Contains(got[tc.family], tc.want) {
			t.Errorf("%s has no series {%s}; it has %v", tc.family, tc.want, got[tc.family])
		}
	}
	if len(got) != 2 {
		t.Errorf("families %v, want the two prober families only", slices.Collect(maps.Keys(got)))
	}

	h.m.RemovePod(p)
	if got := gathered(); len(got) != 0 {
		t.Errorf("series left of a removed pod: %v", got)
	}
}

func TestContainerIDForms(t *testing.T) {
	h := newHarness(t)
	h.m.AddPod(pod("u1", container("app", nil, spec(1, 1, 3, 0), nil)))
	h.statuses.set("u1", runningStatus(start, "app", "abc"))
	h.advance(500 * time.Millisecond)
	h.wantReady("abc", true)
	h.wantReady("containerd://abc", true)
	for _, u := range h.updates() {
		if strings.Contains(u, "://") {
			t.Errorf("update %q carries a scheme", u)
		}
	}
}
