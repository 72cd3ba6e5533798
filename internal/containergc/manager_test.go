package containergc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/testing/fakecri"
)

const h = time.Hour

func writeFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("log line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// filesIn lists the files under dir, relative to it.
func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// A container's log file and the files rotated from it go before the
// container, and nothing else does.
func TestCollectRemovesContainerLogs(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), pods{"a": wanted})
	podDir := filepath.Join(e.logsDir, "default_web_a")
	writeFiles(t, podDir, "app/1.log", "app/1.log.20250601-100000", "app/1.log.20250601-100000.gz",
		"app/10.log", "app/1.logx", "app/2.log", "side/1.log")
	elsewhere := t.TempDir()
	writeFiles(t, elsewhere, "1.log")
	e.rt.addSandbox("sa", "a", ready, 3*h)
	e.rt.addContainer("a1", "a", "app", "sa", exited, 2*h, filepath.Join(podDir, "app/1.log"))
	e.rt.addContainer("a2", "a", "app", "sa", exited, h, filepath.Join(podDir, "app/2.log"))
	e.rt.addContainer("x1", "a", "other", "sa", exited, 2*h, filepath.Join(elsewhere, "1.log"))
	e.rt.addContainer("x2", "a", "other", "sa", exited, h, "")
	e.rt.beforeRemove = func(id string) {
		if _, err := os.Stat(filepath.Join(podDir, "app/1.log")); id == "a1" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("container a1 removed before its log file (stat: %v)", err)
		}
	}

	res, err := e.m.Collect(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Containers: 2}); res != want {
		t.Errorf("Collect() = %+v, want %+v", res, want)
	}
	checkList(t, "calls", e.rt.callList(), []string{"RemoveContainer a1", "RemoveContainer x1"})
	checkList(t, "files left in the pod's log directory", filesIn(t, podDir), []string{"app/1.logx", "app/10.log", "app/2.log", "side/1.log"})
	checkList(t, "files left outside the pod logs directory", filesIn(t, elsewhere), []string{"1.log"})
}

// One failed removal neither stops the pass nor hides the others; it keeps
// what depends on it: the container's sandbox, the pod's log directory.
func TestCollectAggregatesErrors(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), pods{})
	e.rt.addSandbox("sg", "g", dead, 3*h)
	e.rt.addContainer("g1", "g", "app", "sg", exited, 2*h, "")
	e.rt.addSandbox("sp", "p", dead, 3*h)
	e.rt.addContainer("p1", "p", "app", "sp", exited, 2*h, "")
	e.rt.addSandbox("sh", "h", dead, 3*h)
	e.rt.addSandbox("sk", "k", dead, 3*h)
	e.rt.addContainer("k1", "k", "app", "sk", exited, 2*h, "")
	writeFiles(t, e.logsDir, "default_web_g/app/0.log", "default_web_p/app/0.log", "default_web_h/app/0.log", "default_web_k/app/0.log")
	removeErr := status.Error(codes.Unavailable, "runtime busy")
	statusErr := status.Error(codes.Internal, "status broken")
	stopErr := status.Error(codes.Unknown, "failed to destroy network")
	e.rt.failing("RemoveContainer g1", removeErr)
	e.rt.failing("ContainerStatus p1", statusErr)
	e.rt.failing("StopPodSandbox sh", stopErr)
	reg := prometheus.NewPedanticRegistry()
	e.m.metrics = must(newMetrics(reg))

	res, err := e.m.Collect(context.Background(), false)
	if want := (Result{Containers: 1, Sandboxes: 1, PodLogDirs: 1}); res != want {
		t.Errorf("Collect() = %+v, want %+v", res, want)
	}
	for _, want := range []error{removeErr, statusErr, stopErr} {
		if !errors.Is(err, want) {
			t.Errorf("Collect() error = %v, want it to wrap %v", err, want)
		}
	}
	for _, want := range []string{"remove container g1 (app of pod g)", "read the status of container p1", "stop sandbox sh of pod h"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Collect() error = %v, want it to say %q", err, want)
		}
	}
	checkList(t, "calls", e.rt.callList(), []string{
		"RemoveContainer g1", "RemoveContainer k1", "StopPodSandbox sh", "StopPodSandbox sk", "RemovePodSandbox sk",
	})
	sandboxes, containers := e.rt.left()
	checkList(t, "sandboxes left", sandboxes, []string{"sg", "sh", "sp"})
	checkList(t, "containers left", containers, []string{"g1", "p1"})
	checkList(t, "logs left", filesIn(t, e.logsDir), []string{"default_web_g/app/0.log", "default_web_h/app/0.log", "default_web_p/app/0.log"})
	for op, want := range map[string]float64{opRemoveContainer: 1, opContainerStatus: 1, opStopSandbox: 1, opRemoveSandbox: 0} {
		if got := counterValue(t, e.m.metrics.errors.WithLabelValues(op)); got != want {
			t.Errorf("errors_total{operation=%q} = %v, want %v", op, got, want)
		}
	}
	for obj, want := range map[string]float64{objContainer: 1, objSandbox: 1, objPodLogDir: 1} {
		if got := counterValue(t, e.m.metrics.removed.WithLabelValues(obj)); got != want {
			t.Errorf("removed_total{object=%q} = %v, want %v", obj, got, want)
		}
	}
	families, err := reg.Gather()
	series := map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
	}
	if want := map[string]int{"berth_container_gc_removed_total": 3, "berth_container_gc_errors_total": 10}; err != nil || !maps.Equal(series, want) {
		t.Errorf("gathered series %v (%v), want %v", series, err, want)
	}

	// The failures clear: the next pass removes the rest.
	e.rt.failing("RemoveContainer g1", nil)
	e.rt.failing("ContainerStatus p1", nil)
	e.rt.failing("StopPodSandbox sh", nil)
	res, err = e.m.Collect(context.Background(), false)
	if want := (Result{Containers: 2, Sandboxes: 3, PodLogDirs: 3}); err != nil || res != want {
		t.Errorf("second Collect() = %+v, %v; want %+v", res, err, want)
	}
	checkList(t, "logs left", filesIn(t, e.logsDir), nil)
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// What the runtime no longer has counts as removed.
func TestCollectNotFoundIsSuccess(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), pods{})
	e.rt.addSandbox("s1", "g", dead, 3*h)
	e.rt.addSandbox("s2", "g", dead, 2*h)
	e.rt.addContainer("c1", "g", "app", "s1", exited, 2*h, "")
	e.rt.addContainer("c2", "g", "app", "s2", exited, h, "")
	e.rt.addContainer("c3", "g", "side", "s2", unknown, h, "")
	e.rt.failing("ContainerStatus c1", fakecri.NotFound("c1"))
	e.rt.failing("RemoveContainer c2", fakecri.NotFound("c2"))
	e.rt.failing("StopContainer c3", fakecri.NotFound("c3"))
	e.rt.failing("StopPodSandbox s1", fakecri.NotFound("s1"))
	e.rt.failing("RemovePodSandbox s2", fakecri.NotFound("s2"))
	res, err := e.m.Collect(context.Background(), false)
	if want := (Result{Containers: 3, Sandboxes: 2}); err != nil || res != want {
		t.Errorf("Collect() = %+v, %v; want %+v and no error", res, err, want)
	}
	checkList(t, "calls", e.rt.callList(), []string{
		"RemoveContainer c2", "StopContainer c3 2", "StopPodSandbox s1", "StopPodSandbox s2", "RemovePodSandbox s2",
	})
}

// A container in an unknown state may be running: it is stopped with the
// pod's grace period (at least 2 s) before it is removed, and kept when it
// cannot be stopped.
func TestCollectStopsUnknownContainers(t *testing.T) {
	e := newEnv(t, Policy{MaxPerPodContainer: 0, MaxContainers: -1}, pods{"a": wanted})
	e.rt.addSandbox("sa", "a", ready, 3*h)
	e.rt.addContainer("u1", "a", "app", "sa", unknown, 5*h, "", map[string]string{container.AnnotationTerminationGracePeriod: "30"})
	e.rt.addContainer("u2", "a", "app", "sa", unknown, 4*h, "")
	e.rt.addContainer("u3", "a", "app", "sa", unknown, 3*h, "", map[string]string{container.AnnotationTerminationGracePeriod: "0"})
	e.rt.addContainer("u4", "a", "app", "sa", unknown, 2*h, "")
	e.rt.addContainer("e1", "a", "app", "sa", exited, h, "")
	stopErr := status.Error(codes.DeadlineExceeded, "stuck")
	e.rt.failing("StopContainer u4", stopErr)
	res, err := e.m.Collect(context.Background(), false)
	if !errors.Is(err, stopErr) {
		t.Errorf("Collect() error = %v, want %v", err, stopErr)
	}
	if want := (Result{Containers: 4}); res != want {
		t.Errorf("Collect() = %+v, want %+v", res, want)
	}
	checkList(t, "calls", e.rt.callList(), []string{
		"StopContainer u1 30", "RemoveContainer u1",
		"StopContainer u2 2", "RemoveContainer u2",
		"StopContainer u3 2", "RemoveContainer u3",
		"StopContainer u4 2",
		"RemoveContainer e1",
	})
}

// Only what berth labelled is listed, and nothing else is touched, even from
// a runtime that ignores the label selector.
func TestCollectNeverTouchesOtherClients(t *testing.T) {
	for _, careless := range []bool{false, true} {
		e := newEnv(t, Policy{MaxPerPodContainer: 0, MaxContainers: 0}, pods{})
		e.rt.ignoreSelectors = careless
		theirs := map[string]string{container.LabelPodUID: "g"}
		e.rt.AddSandbox(&runtimeapi.PodSandbox{
			Id: "theirs", Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "g"},
			State: dead, CreatedAt: now.Add(-3 * h).UnixNano(), Labels: theirs,
		}, "")
		e.rt.AddContainer(&runtimeapi.Container{
			Id: "their-ctr", PodSandboxId: "theirs", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			State: exited, CreatedAt: now.Add(-2 * h).UnixNano(), Labels: theirs,
		}, nil)
		res, err := e.m.Collect(context.Background(), true)
		if err != nil || res != (Result{}) {
			t.Errorf("careless runtime %v: Collect() = %+v, %v; want nothing removed", careless, res, err)
		}
		checkList(t, "calls", e.rt.callList(), nil)
		want := map[string]string{container.LabelManagedBy: "true"}
		if len(e.rt.selectors) != 2 || !maps.Equal(e.rt.selectors[0], want) || !maps.Equal(e.rt.selectors[1], want) {
			t.Errorf("list selectors = %v, want %v for sandboxes and containers", e.rt.selectors, want)
		}
	}
}

// Before the sources are ready, no pod is taken for gone: nothing is asked
// of the pods, and no log directory is read or removed.
func TestCollectBeforeSourcesReady(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), nil)
	e.m.pods = unasked{t}
	e.ready.Store(false)
	e.rt.addSandbox("s1", "g", dead, 3*h)
	e.rt.addSandbox("s2", "g", dead, 2*h)
	e.rt.addContainer("g1", "g", "app", "s1", exited, 2*h, "")
	e.rt.addContainer("g2", "g", "app", "s2", exited, h, "")
	writeFiles(t, e.logsDir, "default_web_g/app/0.log")
	res, err := e.m.Collect(context.Background(), false)
	if want := (Result{Containers: 1, Sandboxes: 1}); err != nil || res != want {
		t.Errorf("Collect() = %+v, %v; want %+v", res, err, want)
	}
	checkList(t, "logs left", filesIn(t, e.logsDir), []string{"default_web_g/app/0.log"})
}

// The pod logs directory may not exist yet; one that cannot be read is
// reported, and the pass still removes containers and sandboxes.
func TestCollectPodLogsDirUnreadable(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), pods{})
	e.rt.addSandbox("s1", "g", dead, 3*h)
	e.rt.addContainer("g1", "g", "app", "s1", exited, 2*h, "")
	e.m.podLogsDir = filepath.Join(e.logsDir, "missing")
	if res, err := e.m.Collect(context.Background(), false); err != nil || res != (Result{Containers: 1, Sandboxes: 1}) {
		t.Errorf("missing pod logs directory: Collect() = %+v, %v; want the container and sandbox removed", res, err)
	}
	e.rt.addSandbox("s2", "g", dead, 3*h)
	e.rt.addContainer("g2", "g", "app", "s2", exited, 2*h, "")
	e.m.podLogsDir = filepath.Join(e.logsDir, "file")
	writeFiles(t, e.logsDir, "file")
	res, err := e.m.Collect(context.Background(), false)
	if err == nil || !strings.Contains(err.Error(), "read the pod logs directory") {
		t.Errorf("Collect() error = %v, want the pod logs directory unreadable", err)
	}
	if want := (Result{Containers: 1, Sandboxes: 1}); res != want {
		t.Errorf("Collect() = %+v, want %+v", res, want)
	}
}

// A pass fails, removing nothing, when the runtime cannot list.
func TestCollectListErrors(t *testing.T) {
	for _, method := range []string{"ListPodSandboxes", "ListContainers"} {
		e := newEnv(t, DefaultPolicy(), pods{})
		e.rt.addSandbox("s1", "g", dead, 3*h)
		boom := errors.New("boom")
		e.rt.failing(method, boom)
		res, err := e.m.Collect(context.Background(), false)
		if !errors.Is(err, boom) || res != (Result{}) {
			t.Errorf("%s failing: Collect() = %+v, %v; want nothing removed and %v", method, res, err, boom)
		}
		checkList(t, "calls", e.rt.callList(), nil)
	}
}

// The eviction manager's reclaim removes the dead containers and sandboxes
// of terminal pods, which the periodic pass keeps one of; a terminal pod's
// logs stay either way.
func TestDeleteAllUnusedContainers(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), pods{"t": terminal, "a": wanted})
	e.rt.addSandbox("ts1", "t", dead, 3*h)
	e.rt.addSandbox("ts2", "t", dead, 2*h)
	e.rt.addContainer("t1", "t", "app", "ts1", exited, 2*h, "")
	e.rt.addContainer("t2", "t", "app", "ts2", exited, h, "")
	e.rt.addSandbox("as", "a", ready, 3*h)
	e.rt.addContainer("a1", "a", "app", "as", exited, 2*h, "")
	e.rt.addContainer("a2", "a", "app", "as", exited, h, "")
	writeFiles(t, e.logsDir, "default_web_t/app/0.log")
	if err := e.m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	sandboxes, containers := e.rt.left()
	checkList(t, "sandboxes left by the periodic pass", sandboxes, []string{"as", "ts2"})
	checkList(t, "containers left by the periodic pass", containers, []string{"a2", "t2"})
	if err := e.m.DeleteAllUnusedContainers(context.Background()); err != nil {
		t.Fatal(err)
	}
	sandboxes, containers = e.rt.left()
	checkList(t, "sandboxes left by the reclaim", sandboxes, []string{"as"})
	checkList(t, "containers left by the reclaim", containers, []string{"a2"})
	checkList(t, "logs left", filesIn(t, e.logsDir), []string{"default_web_t/app/0.log"})
}

// Passes run one at a time: one that waits for another gives up when its
// context ends, having listed nothing.
func TestCollectSerialized(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), pods{})
	e.rt.listed = make(chan struct{}, 100)
	e.rt.release = make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := e.m.Collect(context.Background(), false)
		first <- err
	}()
	<-e.rt.listed // the first pass holds the lock
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		second <- e.m.DeleteAllUnusedContainers(ctx)
	}()
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Errorf("waiting pass: err = %v, want context.Canceled", err)
	}
	if n := len(e.rt.listed); n != 0 {
		t.Errorf("the waiting pass listed sandboxes %d times while the first ran", n)
	}
	close(e.rt.release)
	if err := <-first; err != nil {
		t.Errorf("first pass: %v", err)
	}
	// The lock is free again; concurrent passes all complete, one at a
	// time.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if _, err := e.m.Collect(context.Background(), i%2 == 0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if e.rt.maxInPass != 1 {
		t.Errorf("%d passes ran at once, want 1", e.rt.maxInPass)
	}
}

// runner drives a Manager's Run; each pass lists sandboxes first, and the
// test waits for that before it looks or moves the clock.
type runner struct {
	e    *testEnv
	stop func()
}

func (e *testEnv) start(t *testing.T) *runner {
	t.Helper()
	e.rt.mu.Lock()
	e.rt.listed = make(chan struct{}, 100)
	e.rt.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.m.Run(ctx)
	}()
	var once sync.Once
	r := &runner{e: e, stop: func() { once.Do(func() { cancel(); <-done }) }}
	t.Cleanup(r.stop)
	return r
}

// waitPass waits for the next pass to begin. When it returns, every earlier
// pass has finished.
func (r *runner) waitPass(t *testing.T) {
	t.Helper()
	select {
	case <-r.e.rt.listed:
	case <-time.After(10 * time.Second):
		t.Fatal("no pass began")
	}
}

// Run collects at once and every Period; every failed pass is a
// ContainerGCFailed node event, as in the kubelet.
func TestRun(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), pods{"a": wanted})
	e.rt.addSandbox("sa", "a", ready, 3*h)
	e.rt.addContainer("a1", "a", "app", "sa", exited, 2*h, "")
	e.rt.addContainer("a2", "a", "app", "sa", exited, h, "")
	// What each pass found as it began, when the one before had finished;
	// read once Run has returned.
	var eventsAt, callsAt [][]string
	e.rt.onPass = func(n int) {
		eventsAt = append(eventsAt, e.events.list())
		callsAt = append(callsAt, e.rt.callList())
		var err error
		if n == 2 || n == 3 {
			err = errors.New("boom")
		}
		e.rt.failing("ListContainers", err)
	}
	r := e.start(t)
	r.waitPass(t)
	for range 4 {
		e.clk.Step(DefaultPeriod)
		r.waitPass(t)
	}
	r.stop()
	if len(callsAt) != 5 {
		t.Fatalf("%d passes, want 5", len(callsAt))
	}
	checkList(t, "calls after the first pass", callsAt[1], []string{"RemoveContainer a1"})
	fail := "Warning ContainerGCFailed: list containers: boom"
	for i, want := range [][]string{nil, nil, {fail}, {fail, fail}, {fail, fail}} {
		checkList(t, fmt.Sprintf("events before pass %d", i+1), eventsAt[i], want)
	}
}

// Before a tick, nothing runs: the pass waits for the period, not for time
// passing in the test.
func TestRunWaitsForThePeriod(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), nil)
	e.m.period = 5 * time.Minute
	r := e.start(t)
	r.waitPass(t)
	for range 4 {
		e.clk.Step(time.Minute)
	}
	select {
	case <-e.rt.listed:
		t.Fatal("a pass began before the period")
	default:
	}
	e.clk.Step(time.Minute)
	r.waitPass(t)
}

func TestNew(t *testing.T) {
	rt, clk := newFakeRuntime(), clocktesting.NewFakeClock(now)
	ok := func() Options {
		return Options{Runtime: rt, PodState: pods{}, SourcesReady: func() bool { return true }, PodLogsDir: "/var/log/pods", Clock: clk}
	}
	m, err := New(ok())
	if err != nil {
		t.Fatal(err)
	}
	if m.period != DefaultPeriod || m.policy != (Policy{}) {
		t.Errorf("period %s, policy %+v; want %s and the zero policy as given", m.period, m.policy, DefaultPeriod)
	}
	tests := []struct {
		name   string
		modify func(*Options)
		want   string
	}{
		{"negative minimum age", func(o *Options) { o.Policy.MinAge = -time.Second }, "--minimum-container-ttl-duration: -1s: must not be negative"},
		{"no runtime", func(o *Options) { o.Runtime = nil }, "needs a runtime"},
		{"no pod state", func(o *Options) { o.PodState = nil }, "needs a runtime"},
		{"no sources", func(o *Options) { o.SourcesReady = nil }, "needs a runtime"},
		{"no clock", func(o *Options) { o.Clock = nil }, "needs a runtime"},
		{"no pod logs directory", func(o *Options) { o.PodLogsDir = "" }, `pod logs directory "": must be an absolute path`},
		{"relative pod logs directory", func(o *Options) { o.PodLogsDir = "logs" }, `pod logs directory "logs": must be an absolute path`},
		{"negative period", func(o *Options) { o.Period = -time.Second }, "period -1s: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok()
			tt.modify(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want %q", err, tt.want)
			}
		})
	}
	reg := prometheus.NewRegistry()
	o := ok()
	o.Metrics = reg
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
	if _, err := New(o); err == nil {
		t.Error("registering the metrics twice: no error")
	}
}

// The list conversion keeps what Choose needs, from labels, metadata and
// annotations.
func TestFromCRI(t *testing.T) {
	created := now.Add(-h)
	sbs := sandboxesFrom([]*runtimeapi.PodSandbox{
		{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1"}, State: ready, CreatedAt: created.UnixNano(), Labels: labels("u1")},
		{Id: "s2", State: dead, CreatedAt: created.UnixNano(), Labels: labels("u2")},
		{Id: "s3", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u3"}, Labels: map[string]string{}},
	})
	wantS := []Sandbox{{ID: "s1", PodUID: "u1", State: ready, CreatedAt: created}, {ID: "s2", PodUID: "u2", State: dead, CreatedAt: created}}
	if !slices.EqualFunc(sbs, wantS, func(a, b Sandbox) bool {
		return a.ID == b.ID && a.PodUID == b.PodUID && a.State == b.State && a.CreatedAt.Equal(b.CreatedAt)
	}) {
		t.Errorf("sandboxes = %+v, want %+v", sbs, wantS)
	}
	l := labels("u1")
	l[container.LabelContainerName] = "from-label"
	cs := containersFrom([]*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: exited, CreatedAt: created.UnixNano(),
			Labels: l, Annotations: map[string]string{container.AnnotationTerminationGracePeriod: "45"}},
		{Id: "c2", PodSandboxId: "s1", State: unknown, CreatedAt: created.UnixNano(), Labels: l},
		{Id: "c3", PodSandboxId: "s9", State: exited, Labels: map[string]string{container.LabelPodUID: "u1"}},
	})
	wantC := []Container{
		{ID: "c1", PodUID: "u1", Name: "app", SandboxID: "s1", State: exited, CreatedAt: created, GracePeriod: 45},
		{ID: "c2", PodUID: "u1", Name: "from-label", SandboxID: "s1", State: unknown, CreatedAt: created},
		{ID: "c3", SandboxID: "s9", State: exited, CreatedAt: time.Unix(0, 0)},
	}
	if !slices.EqualFunc(cs, wantC, func(a, b Container) bool {
		return a.ID == b.ID && a.PodUID == b.PodUID && a.Name == b.Name && a.SandboxID == b.SandboxID &&
			a.State == b.State && a.CreatedAt.Equal(b.CreatedAt) && a.GracePeriod == b.GracePeriod
	}) {
		t.Errorf("containers = %+v, want %+v", cs, wantC)
	}
}
