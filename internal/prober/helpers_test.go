package prober

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/prober/probe"
)

// fakeStatuses is a StatusSource whose statuses the test sets.
type fakeStatuses struct {
	mu sync.Mutex
	m  map[types.UID]v1.PodStatus
}

func (f *fakeStatuses) Get(uid types.UID) (v1.PodStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[uid]
	return *s.DeepCopy(), ok
}

func (f *fakeStatuses) set(uid types.UID, s v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.UID]v1.PodStatus{}
	}
	f.m[uid] = s
}

// outcome is what a fake probe returns.
type outcome struct {
	res    probe.Result
	output string
	err    error
}

// fakeRunner answers each probe (container/type) with the outcome the test
// set, Success by default, and counts the calls.
type fakeRunner struct {
	mu      sync.Mutex
	answers map[string]outcome
	calls   map[string]int
	called  chan string // every call, when not nil
	block   map[string]chan struct{}
}

func probeName(container string, t ProbeType) string { return container + "/" + string(t) }

func (f *fakeRunner) set(container string, t ProbeType, o outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answers == nil {
		f.answers = map[string]outcome{}
	}
	f.answers[probeName(container, t)] = o
}

func (f *fakeRunner) count(container string, t ProbeType) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[probeName(container, t)]
}

func (f *fakeRunner) Run(ctx context.Context, p *v1.Probe, _ *v1.Pod, c *v1.Container, containerID, _ string) (probe.Result, string, error) {
	t := Startup
	switch p {
	case c.LivenessProbe:
		t = Liveness
	case c.ReadinessProbe:
		t = Readiness
	}
	name := probeName(c.Name, t)
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
	o, ok := f.answers[name]
	block := f.block[name]
	f.mu.Unlock()
	if f.called != nil {
		f.called <- name
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return probe.Unknown, "", ctx.Err()
		}
	}
	if !ok {
		return probe.Success, "", nil
	}
	return o.res, o.output, o.err
}

type event struct{ eventType, reason, message string }

type fakeRecorder struct {
	mu         sync.Mutex
	events     []event
	nodeEvents []event
}

func (f *fakeRecorder) NodeEvent(eventType, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodeEvents = append(f.nodeEvents, event{eventType, reason, message})
}

func (f *fakeRecorder) allNode() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event(nil), f.nodeEvents...)
}

func (f *fakeRecorder) Event(_ *v1.Pod, eventType, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event{eventType, reason, message})
}

func (f *fakeRecorder) all() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event(nil), f.events...)
}

// harness is a Manager with fakes all around, driven attempt by attempt on a
// fake clock without its scheduler goroutine or pool.
type harness struct {
	t        *testing.T
	m        *Manager
	clk      *clocktesting.FakeClock
	statuses *fakeStatuses
	runner   *fakeRunner
	recorder *fakeRecorder
	reg      *prometheus.Registry
	logs     *bytes.Buffer
	path     string
}

// start is when harness managers start; containers of the tests start later.
var start = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessAt(t, filepath.Join(t.TempDir(), "probes.json"), start)
}

func newHarnessAt(t *testing.T, path string, now time.Time) *harness {
	t.Helper()
	h := &harness{
		t:        t,
		clk:      clocktesting.NewFakeClock(now),
		statuses: &fakeStatuses{},
		runner:   &fakeRunner{},
		recorder: &fakeRecorder{},
		reg:      prometheus.NewRegistry(),
		logs:     &bytes.Buffer{},
		path:     path,
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := NewManager(h.runner, h.statuses, h.recorder, h.clk, h.reg, path, log)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return h
}

// runDue runs, one by one, every attempt that is due at the fake time.
func (h *harness) runDue() {
	h.t.Helper()
	for range 10000 {
		w, due, ok := h.m.sched.popDue(h.clk.Now())
		if !ok {
			return
		}
		h.m.attempt(context.Background(), w, due)
	}
	h.t.Fatal("attempts keep coming due at the same instant")
}

// advance moves the fake clock by d in steps of at most 100ms, running
// every attempt at its due time.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.runDue()
	for d > 0 {
		s := min(d, 100*time.Millisecond)
		h.clk.Step(s)
		d -= s
		h.runDue()
	}
}

// pod builds a pod with the given containers.
func pod(uid string, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: containers},
	}
}

func container(name string, liveness, readiness, startup *v1.Probe) v1.Container {
	return v1.Container{Name: name, LivenessProbe: liveness, ReadinessProbe: readiness, StartupProbe: startup}
}

// spec is a tcp probe with the given period, thresholds and initial delay.
func spec(period, success, failure, delay int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:        v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{}},
		PeriodSeconds:       period,
		SuccessThreshold:    success,
		FailureThreshold:    failure,
		InitialDelaySeconds: delay,
		TimeoutSeconds:      1,
	}
}

// runningStatus is a Running pod whose containers run since startedAt, with
// IDs "containerd://<id>".
func runningStatus(startedAt time.Time, nameIDs ...string) v1.PodStatus {
	s := v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1"}
	for i := 0; i < len(nameIDs); i += 2 {
		s.ContainerStatuses = append(s.ContainerStatuses, v1.ContainerStatus{
			Name:        nameIDs[i],
			ContainerID: "containerd://" + nameIDs[i+1],
			State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
		})
	}
	return s
}

func (h *harness) wantLiveness(id string, want Result, wantOK bool) {
	h.t.Helper()
	if got, ok := h.m.Liveness(id); got != want || ok != wantOK {
		h.t.Errorf("Liveness(%s) = %v, %v; want %v, %v", id, got, ok, want, wantOK)
	}
}

func (h *harness) wantReady(id string, want bool) {
	h.t.Helper()
	if got := h.m.Ready(id); got != want {
		h.t.Errorf("Ready(%s) = %v, want %v", id, got, want)
	}
}

func (h *harness) wantStarted(id string, want bool) {
	h.t.Helper()
	if got := h.m.Started(id); got != want {
		h.t.Errorf("Started(%s) = %v, want %v", id, got, want)
	}
}

func (h *harness) wantCalls(container string, t ProbeType, want int) {
	h.t.Helper()
	if got := h.runner.count(container, t); got != want {
		h.t.Errorf("%s probes = %d, want %d", probeName(container, t), got, want)
	}
}

// updates takes the updates delivered so far (the pump does not run in a
// harness: read the queue).
func (h *harness) updates() []string {
	var out []string
	for {
		u, ok := h.m.updates.pop()
		if !ok {
			return out
		}
		out = append(out, fmt.Sprintf("%s %s %s", u.ContainerID, u.Type, u.Result))
	}
}

// series counts the series of a metric family in the harness's registry.
func (h *harness) series(name string) int {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// observations is the sample count of the duration histogram of a probe type.
func (h *harness) observations(probeType string) uint64 {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "prober_probe_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "probe_type" && l.GetValue() == probeType {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
