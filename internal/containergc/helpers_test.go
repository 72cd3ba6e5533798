package containergc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
)

func notFound(what string) error { return status.Errorf(codes.NotFound, "%s not found", what) }

// fakeRuntime is a CRI runtime over maps. It is safe for concurrent use.
type fakeRuntime struct {
	mu         sync.Mutex
	sandboxes  map[string]*runtimeapi.PodSandbox
	containers map[string]*runtimeapi.Container
	logPaths   map[string]string // by container ID
	// errs fails a call: the key is "<method> <id>" or, for lists, the
	// method's name.
	errs map[string]error
	// calls lists the calls that change something, in order.
	calls []string
	// selectors are the label selectors of every list, in order.
	selectors []map[string]string
	// ignoreSelectors lists everything, as a careless runtime might.
	ignoreSelectors bool
	// listed, when set, receives a value as each pass lists sandboxes.
	listed chan struct{}
	// release, when set, holds ListPodSandboxes until it is closed or
	// the call's context ends.
	release chan struct{}
	// beforeRemove, when set, runs as RemoveContainer is called.
	beforeRemove func(id string)
	// onPass, when set, runs as pass n (from 1) lists sandboxes, before
	// anything else: it sets up the runtime that pass sees.
	onPass func(n int)
	passes int
	// inPass counts the passes between their two lists, and maxInPass the
	// most at once.
	inPass, maxInPass int
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{
		sandboxes:  map[string]*runtimeapi.PodSandbox{},
		containers: map[string]*runtimeapi.Container{},
		logPaths:   map[string]string{},
		errs:       map[string]error{},
	}
}

func labels(uid types.UID) map[string]string {
	return map[string]string{container.LabelManagedBy: "true", container.LabelPodUID: string(uid)}
}

// addSandbox adds one of berth's sandboxes of pod uid created age before
// now.
func (r *fakeRuntime) addSandbox(id string, uid types.UID, state runtimeapi.PodSandboxState, age time.Duration) *runtimeapi.PodSandbox {
	s := &runtimeapi.PodSandbox{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: string(uid)},
		State:     state,
		CreatedAt: now.Add(-age).UnixNano(),
		Labels:    labels(uid),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes[id] = s
	return s
}

// addContainer adds one of berth's containers, with its log path.
func (r *fakeRuntime) addContainer(id string, uid types.UID, name, sandboxID string, state runtimeapi.ContainerState, age time.Duration, logPath string) *runtimeapi.Container {
	l := labels(uid)
	l[container.LabelContainerName] = name
	c := &runtimeapi.Container{
		Id:           id,
		PodSandboxId: sandboxID,
		Metadata:     &runtimeapi.ContainerMetadata{Name: name},
		State:        state,
		CreatedAt:    now.Add(-age).UnixNano(),
		Labels:       l,
		Annotations:  map[string]string{},
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers[id] = c
	if logPath != "" {
		r.logPaths[id] = logPath
	}
	return c
}

func (r *fakeRuntime) failing(key string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[key] = err
}

func (r *fakeRuntime) matches(l, selector map[string]string) bool {
	if r.ignoreSelectors {
		return true
	}
	for k, v := range selector {
		if l[k] != v {
			return false
		}
	}
	return true
}

func (r *fakeRuntime) ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	r.passes++
	n, onPass := r.passes, r.onPass
	r.mu.Unlock()
	if onPass != nil {
		onPass(n)
	}
	r.mu.Lock()
	r.inPass++
	r.maxInPass = max(r.maxInPass, r.inPass)
	r.selectors = append(r.selectors, maps.Clone(f.GetLabelSelector()))
	listed, release := r.listed, r.release
	r.mu.Unlock()
	// Let any other pass run into this one.
	goruntime.Gosched()
	if listed != nil {
		select {
		case listed <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.errs["ListPodSandboxes"]; err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandbox
	for _, id := range slices.Sorted(maps.Keys(r.sandboxes)) {
		if s := r.sandboxes[id]; r.matches(s.Labels, f.GetLabelSelector()) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (r *fakeRuntime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.selectors = append(r.selectors, maps.Clone(f.GetLabelSelector()))
	r.inPass--
	if err := r.errs["ListContainers"]; err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		if c := r.containers[id]; r.matches(c.Labels, f.GetLabelSelector()) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (r *fakeRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.errs["ContainerStatus "+id]; err != nil {
		return nil, err
	}
	if _, ok := r.containers[id]; !ok {
		return nil, notFound("container " + id)
	}
	return &runtimeapi.ContainerStatus{Id: id, LogPath: r.logPaths[id]}, nil
}

// call records a call and returns its injected error, or NotFound when the
// object is not there.
func (r *fakeRuntime) call(method, id string, extra string, exists bool) error {
	r.calls = append(r.calls, method+" "+id+extra)
	if err := r.errs[method+" "+id]; err != nil {
		return err
	}
	if !exists {
		return notFound(id)
	}
	return nil
}

func (r *fakeRuntime) StopContainer(_ context.Context, id string, grace int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.containers[id]
	return r.call("StopContainer", id, " "+strconv.FormatInt(grace, 10), ok)
}

func (r *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	hook := r.beforeRemove
	r.mu.Unlock()
	if hook != nil {
		hook(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.containers[id]
	if err := r.call("RemoveContainer", id, "", ok); err != nil {
		return err
	}
	delete(r.containers, id)
	return nil
}

func (r *fakeRuntime) StopPodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.sandboxes[id]
	return r.call("StopPodSandbox", id, "", ok)
}

func (r *fakeRuntime) RemovePodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.sandboxes[id]
	if err := r.call("RemovePodSandbox", id, "", ok); err != nil {
		return err
	}
	delete(r.sandboxes, id)
	return nil
}

func (r *fakeRuntime) callList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *fakeRuntime) left() (sandboxes, containers []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.sandboxes)), slices.Sorted(maps.Keys(r.containers))
}

// fakeEvents records node events as "Type Reason: message".
type fakeEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *fakeEvents) NodeEvent(eventType, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, fmt.Sprintf("%s %s: %s", eventType, reason, message))
}

func (e *fakeEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

// syncPods is a pods PodState safe for concurrent use.
type syncPods struct {
	mu   sync.Mutex
	pods pods
}

func (p *syncPods) ShouldPodContentBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods.ShouldPodContentBeRemoved(uid)
}

func (p *syncPods) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods.ShouldPodRuntimeBeRemoved(uid)
}

type testEnv struct {
	clk     *clocktesting.FakeClock
	rt      *fakeRuntime
	events  *fakeEvents
	pods    *syncPods
	ready   atomic.Bool // the sources
	logsDir string
	m       *Manager
}

// newEnv makes a manager with the default policy over an empty fake
// runtime, a pod logs directory of its own, and sources ready; the pods in
// wanted are wanted, any other is gone.
func newEnv(t *testing.T, policy Policy, wanted pods) *testEnv {
	t.Helper()
	e := &testEnv{
		clk:     clocktesting.NewFakeClock(now),
		rt:      newFakeRuntime(),
		events:  &fakeEvents{},
		pods:    &syncPods{pods: wanted},
		logsDir: t.TempDir(),
	}
	e.ready.Store(true)
	m, err := New(Options{
		Runtime: e.rt, Policy: policy, PodState: e.pods, SourcesReady: e.ready.Load,
		PodLogsDir: e.logsDir, Clock: e.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Events: e.events,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

func checkList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}
