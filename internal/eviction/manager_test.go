package eviction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// env is a node for a Manager: the test sets what the stats report and the
// active pods, and the fakes record what the manager does.
type env struct {
	t   *testing.T
	clk *testingclock.FakeClock
	reg *prometheus.Registry
	m   *Manager

	mu sync.Mutex
	// node builds the summary of the node as it is now, measured at the
	// given time.
	node func(at time.Time) *summary
	// statsAt, when set, is the time of every measure: stats that are not
	// refreshed.
	statsAt  time.Time
	statsErr error
	gets     int
	got      chan struct{}
	pods     []*v1.Pod
	kills    []kill
	killErr  error
	reclaims []string
	// onReclaim runs after each reclaim step, e.g. to free disk.
	onReclaim  func(step string)
	podEvents  []string
	nodeEvents []string
}

type kill struct {
	pod    *v1.Pod
	grace  int64
	status v1.PodStatus
}

func newEnv(t *testing.T, thresholds []Threshold, opts ...func(*Options)) *env {
	t.Helper()
	e := &env{
		t:   t,
		clk: testingclock.NewFakeClock(t0),
		reg: prometheus.NewRegistry(),
		got: make(chan struct{}, 100),
	}
	o := Options{
		Thresholds:  thresholds,
		Summary:     e,
		ActivePods:  e.activePods,
		KillPod:     e.killPod,
		ImageGC:     e,
		ContainerGC: e,
		NodeName:    "node-1",
		Clock:       e.clk,
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Events:      e,
		Metrics:     e.reg,
	}
	for _, f := range opts {
		f(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

func (e *env) Get(context.Context) (*statsapi.Summary, error) {
	e.mu.Lock()
	defer func() {
		e.mu.Unlock()
		e.got <- struct{}{}
	}()
	e.gets++
	if e.statsErr != nil {
		return nil, e.statsErr
	}
	at := e.clk.Now()
	if !e.statsAt.IsZero() {
		at = e.statsAt
	}
	return e.node(at).build(), nil
}

func (e *env) activePods() []*v1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.pods)
}

// killPod stops the pod at once: it is no longer active.
func (e *env) killPod(_ context.Context, pod *v1.Pod, grace int64, status v1.PodStatus) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kills = append(e.kills, kill{pod, grace, status})
	if e.killErr != nil {
		return e.killErr
	}
	e.pods = slices.DeleteFunc(e.pods, func(p *v1.Pod) bool { return p.UID == pod.UID })
	return nil
}

func (e *env) reclaim(step string) {
	e.mu.Lock()
	e.reclaims = append(e.reclaims, step)
	f := e.onReclaim
	e.mu.Unlock()
	if f != nil {
		f(step)
	}
}

func (e *env) DeleteUnusedImages(context.Context) (int64, error) {
	e.reclaim(reclaimImages)
	return 0, nil
}

func (e *env) DeleteAllUnusedContainers(context.Context) error {
	e.reclaim(reclaimContainers)
	return nil
}

func (e *env) Event(pod *v1.Pod, eventType, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.podEvents = append(e.podEvents, fmt.Sprintf("%s %s %s: %s", pod.Name, eventType, reason, message))
}

func (e *env) NodeEvent(eventType, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nodeEvents = append(e.nodeEvents, fmt.Sprintf("%s %s: %s", eventType, reason, message))
}

func (e *env) setNode(f func(at time.Time) *summary) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.node = f
}

func (e *env) setPods(pods ...*v1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pods = pods
}

// sync runs one pass and fails the test on an error.
func (e *env) sync() *v1.Pod {
	e.t.Helper()
	p, err := e.m.Synchronize(context.Background())
	if err != nil {
		e.t.Fatalf("Synchronize: %v", err)
	}
	return p
}

func (e *env) killed() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, k := range e.kills {
		out = append(out, k.pod.Name)
	}
	return strings.Join(out, ",")
}

// takeNodeEvents returns the node events since the last call.
func (e *env) takeNodeEvents() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.nodeEvents
	e.nodeEvents = nil
	return out
}

func (e *env) condition(c v1.NodeConditionType) v1.ConditionStatus {
	for _, cond := range e.m.Conditions() {
		if cond.Type == c {
			return cond.Status
		}
	}
	e.t.Fatalf("no %s condition", c)
	return ""
}

func (e *env) evictions(signal Signal) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kubelet_evictions" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == string(signal) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// diskNode is a node whose one disk (nodefs and imagefs alike) has avail
// of 100Gi free, with plenty of memory, and the given pod stats.
func diskNode(avail *string, pods ...func() statsapi.PodStats) func(at time.Time) *summary {
	return func(at time.Time) *summary {
		s := newSummary(at).memory("8Gi", "8Gi").nodeFs(*avail, "100Gi", 1e6, 1e6).imageFs(*avail, "100Gi", 1e6, 1e6)
		for _, p := range pods {
			s.pod(p())
		}
		return s
	}
}

func TestReclaimFreesEnough(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalNodeFsAvailable, "10%", 0)})
	avail := "5Gi"
	a := newPod("a", container("c"))
	e.setNode(diskNode(&avail, func() statsapi.PodStats { return statsOf(a).container("c", "", "1Gi", "1Mi", 1).build() }))
	e.setPods(a)
	e.onReclaim = func(step string) {
		if step == reclaimImages {
			avail = "20Gi"
		}
	}
	if p := e.sync(); p != nil {
		t.Errorf("evicted %s, want no eviction", p.Name)
	}
	if got, want := e.reclaims, []string{reclaimContainers, reclaimImages}; !slices.Equal(got, want) {
		t.Errorf("reclaims %v, want %v", got, want)
	}
	if e.killed() != "" {
		t.Errorf("killed %s", e.killed())
	}
	if e.gets != 2 {
		t.Errorf("%d stats summaries, want 2: before and after reclaiming", e.gets)
	}
	want := []string{
		"Normal NodeHasSufficientMemory: Node node-1 status is now: NodeHasSufficientMemory",
		"Normal NodeHasDiskPressure: Node node-1 status is now: NodeHasDiskPressure",
		"Normal NodeHasSufficientPID: Node node-1 status is now: NodeHasSufficientPID",
		"Warning EvictionThresholdMet: Attempting to reclaim ephemeral-storage",
	}
	if got := e.takeNodeEvents(); !slices.Equal(got, want) {
		t.Errorf("node events:\n got %q\nwant %q", got, want)
	}
	// The pressure was observed before reclaiming: it stays for the
	// transition period, and refuses pods meanwhile.
	if got := e.condition(v1.NodeDiskPressure); got != v1.ConditionTrue {
		t.Errorf("DiskPressure %s, want True", got)
	}
	if ok, reason, message := e.m.Admit(newPod("new", container("c", "memory=1Gi"))); ok || reason != "Evicted" || message != "The node had condition: [DiskPressure]. " {
		t.Errorf("Admit = %v %q %q", ok, reason, message)
	}
}

func TestReclaimNotEnoughEvictsOnePod(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalNodeFsAvailable, "10%", 0)})
	avail := "5Gi"
	static := newPod("static-etcd", staticPod, container("c"))
	big := newPod("big", container("c"))
	small := newPod("small", container("c"))
	e.setNode(diskNode(&avail,
		func() statsapi.PodStats { return statsOf(static).container("c", "", "40Gi", "1Mi", 1).build() },
		func() statsapi.PodStats { return statsOf(small).container("c", "", "1Gi", "1Mi", 1).build() },
		func() statsapi.PodStats { return statsOf(big).container("c", "", "3Gi", "1Mi", 1).build() },
	))
	e.setPods(small, static, big)
	e.onReclaim = func(step string) {
		if step == reclaimImages {
			avail = "6Gi" // still below 10%
		}
	}
	p := e.sync()
	if p == nil || p.Name != "big" {
		t.Fatalf("evicted %v, want big", p)
	}
	if got := e.killed(); got != "big" {
		t.Fatalf("killed %q, want only big: the critical static pod is skipped", got)
	}
	k := e.kills[0]
	wantMessage := "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. " +
		"Container c was using 3073Mi, request is 0, has larger consumption of ephemeral-storage. "
	if k.grace != 1 {
		t.Errorf("grace period %d, want 1 for a hard threshold", k.grace)
	}
	if k.status.Phase != v1.PodFailed || k.status.Reason != "Evicted" || k.status.Message != wantMessage {
		t.Errorf("status %s %s %q, want Failed Evicted %q", k.status.Phase, k.status.Reason, k.status.Message, wantMessage)
	}
	if len(k.status.Conditions) != 1 || k.status.Conditions[0].Type != v1.DisruptionTarget || k.status.Conditions[0].Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("conditions %+v", k.status.Conditions)
	}
	if got, want := e.podEvents, []string{"big Warning Evicted: " + wantMessage}; !slices.Equal(got, want) {
		t.Errorf("pod events %q, want %q", got, want)
	}
	if got := e.evictions(SignalNodeFsAvailable); got != 1 {
		t.Errorf("kubelet_evictions{nodefs.available} = %v, want 1", got)
	}
	last := e.m.Status().LastEviction
	if last == nil || last.Name != "big" || last.Signal != SignalNodeFsAvailable || last.Resource != v1.ResourceEphemeralStorage ||
		last.GracePeriodSeconds != 1 || last.Message != wantMessage || last.Annotations[OffendingContainersKey] != "c" || last.Error != "" {
		t.Errorf("last eviction %+v", last)
	}
}

func TestOnlyCriticalPodsLeft(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalMemoryAvailable, "100Mi", 0)})
	static := newPod("static", staticPod, container("c"))
	e.setNode(func(at time.Time) *summary {
		return newSummary(at).memory("50Mi", "8Gi").pod(statsOf(static).memory("4Gi").build())
	})
	e.setPods(static)
	if p := e.sync(); p != nil {
		t.Errorf("evicted %s", p.Name)
	}
	if len(e.kills) != 0 || len(e.reclaims) != 0 {
		t.Errorf("kills %v, reclaims %v: memory has nothing to reclaim and the pod is critical", e.kills, e.reclaims)
	}
}

func TestSoftThresholdWaitsForItsGracePeriod(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalMemoryAvailable, "1Gi", time.Minute)}, func(o *Options) {
		o.MaxPodGracePeriodSeconds = 60
	})
	a := newPod("a", container("c"), func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(30)) })
	e.setNode(func(at time.Time) *summary {
		return newSummary(at).memory("900Mi", "7Gi").pod(statsOf(a).memory("2Gi").container("c", "2Gi", "", "", 0).build())
	})
	e.setPods(a)
	for _, step := range []time.Duration{0, 30 * time.Second, 29 * time.Second} {
		e.clk.Step(step)
		if p := e.sync(); p != nil {
			t.Fatalf("after %v: evicted %s before the grace period", e.clk.Since(t0), p.Name)
		}
		if got := e.condition(v1.NodeMemoryPressure); got != v1.ConditionTrue {
			t.Errorf("MemoryPressure %s, want True as soon as a soft threshold is met", got)
		}
	}
	st := e.m.Status()
	if len(st.Thresholds) != 1 || !st.Thresholds[0].Met || st.Thresholds[0].Enforced || !st.Thresholds[0].MetSince.Equal(t0) ||
		st.Thresholds[0].Available != "900Mi" || st.Thresholds[0].Quantity != "1Gi" || st.Thresholds[0].GracePeriod.Duration != time.Minute {
		t.Errorf("status before the grace period: %+v", st.Thresholds)
	}
	e.clk.Step(time.Second)
	if p := e.sync(); p == nil || p.Name != "a" {
		t.Fatalf("evicted %v after the grace period, want a", p)
	}
	if got := e.kills[0].grace; got != 30 {
		t.Errorf("grace period %d, want the pod's 30 (below evictionMaxPodGracePeriod 60)", got)
	}
	if st := e.m.Status(); !st.Thresholds[0].Enforced {
		t.Errorf("status after the grace period: %+v", st.Thresholds)
	}
}

func TestPressureClearsOnlyAfterTransitionPeriod(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalMemoryAvailable, "100Mi", 0)}, func(o *Options) {
		o.ImageGC, o.ContainerGC = nil, nil
	})
	avail := "50Mi"
	e.setNode(func(at time.Time) *summary { return newSummary(at).memory(avail, "8Gi") })
	bestEffort := newPod("best-effort", container("c"))
	burstable := newPod("burstable", container("c", "memory=10Mi"))

	e.sync()
	if got := e.condition(v1.NodeMemoryPressure); got != v1.ConditionTrue {
		t.Fatalf("MemoryPressure %s, want True", got)
	}
	if ok, _, msg := e.m.Admit(bestEffort); ok || msg != "The node had condition: [MemoryPressure]. " {
		t.Errorf("best effort admitted under memory pressure (%q)", msg)
	}
	if ok, _, _ := e.m.Admit(burstable); !ok {
		t.Error("burstable refused under memory pressure alone")
	}
	e.takeNodeEvents()

	avail = "5Gi"
	for _, at := range []time.Duration{10 * time.Second, DefaultPressureTransitionPeriod - time.Second} {
		e.clk.SetTime(t0.Add(at))
		e.sync()
		if got := e.condition(v1.NodeMemoryPressure); got != v1.ConditionTrue {
			t.Errorf("at +%v: MemoryPressure %s, want True until the transition period has passed", at, got)
		}
	}
	if ev := e.takeNodeEvents(); len(ev) != 0 {
		t.Errorf("node events while pressure stays: %q", ev)
	}
	e.clk.SetTime(t0.Add(DefaultPressureTransitionPeriod))
	e.sync()
	if got := e.condition(v1.NodeMemoryPressure); got != v1.ConditionFalse {
		t.Errorf("MemoryPressure %s, want False", got)
	}
	if got, want := e.takeNodeEvents(), []string{"Normal NodeHasSufficientMemory: Node node-1 status is now: NodeHasSufficientMemory"}; !slices.Equal(got, want) {
		t.Errorf("node events %q, want %q", got, want)
	}
	if ok, _, _ := e.m.Admit(bestEffort); !ok {
		t.Error("best effort refused without pressure")
	}
	cond := e.m.Conditions()[0]
	if cond.Reason != "KubeletHasSufficientMemory" || !cond.LastTransitionTime.Time.Equal(t0.Add(DefaultPressureTransitionPeriod)) {
		t.Errorf("MemoryPressure condition %+v", cond)
	}
}

func TestMinimumReclaimKeepsEvicting(t *testing.T) {
	e := newEnv(t, []Threshold{withMinReclaim(threshold(t, SignalMemoryAvailable, "100Mi", 0), "500Mi")})
	avail := "50Mi"
	a, b, c := newPod("a", container("c")), newPod("b", container("c")), newPod("c", container("c"))
	e.setNode(func(at time.Time) *summary {
		return newSummary(at).memory(avail, "8Gi").
			pod(statsOf(a).memory("3Gi").build()).
			pod(statsOf(b).memory("2Gi").build()).
			pod(statsOf(c).memory("1Gi").build())
	})
	e.setPods(c, b, a)
	for _, pass := range []struct {
		avail, want string
	}{
		{"50Mi", "a"},
		// Above the threshold but not 500Mi past it: the eviction goes on.
		{"300Mi", "b"},
		{"700Mi", ""},
		// Resolved: above the threshold is enough again.
		{"300Mi", ""},
	} {
		avail = pass.avail
		e.clk.Step(DefaultMonitoringInterval)
		got := ""
		if p := e.sync(); p != nil {
			got = p.Name
		}
		if got != pass.want {
			t.Errorf("%s available: evicted %q, want %q", pass.avail, got, pass.want)
		}
	}
	if got := e.killed(); got != "a,b" {
		t.Errorf("killed %s, want a,b", got)
	}
}

func TestStaleStatsDoNotEvictTwice(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalMemoryAvailable, "100Mi", 0)})
	a, b := newPod("a", container("c")), newPod("b", container("c"))
	e.statsAt = t0
	e.setNode(func(at time.Time) *summary {
		return newSummary(at).memory("50Mi", "8Gi").pod(statsOf(a).memory("3Gi").build()).pod(statsOf(b).memory("2Gi").build())
	})
	e.setPods(a, b)
	if p := e.sync(); p == nil || p.Name != "a" {
		t.Fatalf("evicted %v, want a", p)
	}
	e.clk.Step(DefaultMonitoringInterval)
	if p := e.sync(); p != nil {
		t.Errorf("evicted %s on the stats that already evicted a", p.Name)
	}
	e.statsAt = e.clk.Now()
	if p := e.sync(); p == nil || p.Name != "b" {
		t.Errorf("evicted %v on fresh stats, want b", p)
	}
}

func TestKillFailure(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalMemoryAvailable, "100Mi", 0)})
	a := newPod("a", container("c"))
	e.setNode(func(at time.Time) *summary {
		return newSummary(at).memory("50Mi", "8Gi").pod(statsOf(a).memory("3Gi").build())
	})
	e.setPods(a)
	e.killErr = errors.New("runtime unavailable")
	p, err := e.m.Synchronize(context.Background())
	if p == nil || p.Name != "a" || err == nil || !strings.Contains(err.Error(), "runtime unavailable") {
		t.Errorf("Synchronize = %v, %v; want a and the kill error", p, err)
	}
	if last := e.m.Status().LastEviction; last == nil || last.Error != "runtime unavailable" {
		t.Errorf("last eviction %+v", last)
	}
}

func TestStatsFailure(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalMemoryAvailable, "100Mi", 0)})
	e.statsErr = errors.New("cgroup gone")
	_, err := e.m.Synchronize(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cgroup gone") {
		t.Fatalf("Synchronize error %v", err)
	}
	st := e.m.Status()
	if !strings.Contains(st.Error, "failed to get summary stats: cgroup gone") || !st.LastSync.IsZero() {
		t.Errorf("status %+v", st)
	}
	if got := e.condition(v1.NodeMemoryPressure); got != v1.ConditionUnknown {
		t.Errorf("MemoryPressure %s before any observation, want Unknown", got)
	}
}

func TestImageFsDetection(t *testing.T) {
	calls := 0
	e := newEnv(t, []Threshold{threshold(t, SignalNodeFsAvailable, "10%", 0)}, func(o *Options) {
		o.HasImageFs = func(context.Context) (bool, error) {
			calls++
			if calls == 1 {
				return false, errors.New("not yet")
			}
			return true, nil
		}
	})
	avail := "5Gi"
	layer, logs := newPod("big-layer", container("c")), newPod("big-logs", container("c"))
	e.setNode(diskNode(&avail,
		func() statsapi.PodStats { return statsOf(layer).container("c", "", "9Gi", "1Mi", 1).build() },
		func() statsapi.PodStats { return statsOf(logs).container("c", "", "1Mi", "1Gi", 1).build() },
	))
	e.setPods(layer, logs)
	if _, err := e.m.Synchronize(context.Background()); err == nil {
		t.Fatal("no error when the image filesystem is unknown")
	}
	// With images on a disk of their own, nodefs pressure has nothing to
	// reclaim and is about logs and volumes.
	if p := e.sync(); p == nil || p.Name != "big-logs" {
		t.Errorf("evicted %v, want big-logs", p)
	}
	if len(e.reclaims) != 0 || e.gets != 1 {
		t.Errorf("reclaims %v and %d summaries, want none and 1", e.reclaims, e.gets)
	}
	e.sync()
	if calls != 2 {
		t.Errorf("HasImageFs asked %d times, want 2: until it answers", calls)
	}
}

func TestNoThresholds(t *testing.T) {
	e := newEnv(t, nil)
	if p := e.sync(); p != nil {
		t.Errorf("evicted %s", p.Name)
	}
	if e.gets != 0 {
		t.Errorf("%d summaries without thresholds", e.gets)
	}
	for _, c := range e.m.Conditions() {
		if c.Status != v1.ConditionFalse {
			t.Errorf("%s %s, want False", c.Type, c.Status)
		}
	}
	if got := len(e.takeNodeEvents()); got != 3 {
		t.Errorf("%d node events, want the 3 initial ones", got)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without dependencies succeeded")
	}
	e := newEnv(t, nil)
	if _, err := New(Options{Summary: e, ActivePods: e.activePods, KillPod: e.killPod, Clock: e.clk, PressureTransitionPeriod: -time.Second}); err == nil {
		t.Error("New with a negative transition period succeeded")
	}
	reg := prometheus.NewRegistry()
	opts := Options{Summary: e, ActivePods: e.activePods, KillPod: e.killPod, Clock: e.clk, Metrics: reg}
	if _, err := New(opts); err != nil {
		t.Fatal(err)
	}
	if _, err := New(opts); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}

// waitGet waits for the manager to ask for stats.
func (e *env) waitGet() {
	e.t.Helper()
	select {
	case <-e.got:
	case <-time.After(10 * time.Second):
		e.t.Fatal("the manager asked for no stats")
	}
}

// waitTimer waits until Run waits on its clock, so that moving the clock
// fires its timer.
func (e *env) waitTimer() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !e.clk.HasWaiters() {
		if time.Now().After(deadline) {
			e.t.Fatal("Run never waited for its next pass")
		}
		runtime.Gosched()
	}
}

func TestRun(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalMemoryAvailable, "100Mi", 0)}, func(o *Options) {
		o.ImageGC, o.ContainerGC = nil, nil
	})
	avail := "5Gi"
	a := newPod("a", container("c"))
	// Get builds the summary under e.mu, which guards avail.
	e.setNode(func(at time.Time) *summary {
		return newSummary(at).memory(avail, "8Gi").pod(statsOf(a).memory("3Gi").build())
	})
	e.setPods(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.m.Run(ctx)
	}()
	e.waitGet() // the first pass, at once
	e.waitTimer()
	if got := e.killed(); got != "" {
		t.Fatalf("killed %s without pressure", got)
	}

	// Pressure: the next pass, one interval later, evicts; the pass after an
	// eviction runs at once.
	e.mu.Lock()
	avail = "50Mi"
	e.mu.Unlock()
	e.clk.Step(DefaultMonitoringInterval)
	e.waitGet()
	e.waitGet()
	e.waitTimer()
	if got := e.killed(); got != "a" {
		t.Errorf("killed %q, want a", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}
