package containergc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/testing/fakecri"
)

var _ Runtime = (*fakecri.Runtime)(nil)

// fakeRuntime is the shared fake CRI with what these tests watch of a GC
// pass: the label selectors of its lists, its passes running at once, and
// hooks to hold or change a pass. It is safe for concurrent use.
type fakeRuntime struct {
	*fakecri.Runtime
	mu sync.Mutex
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
	r := &fakeRuntime{Runtime: fakecri.New(nil)}
	r.OnCall(func(_ context.Context, call string) error {
		if id, ok := strings.CutPrefix(call, "RemoveContainer "); ok {
			r.mu.Lock()
			hook := r.beforeRemove
			r.mu.Unlock()
			if hook != nil {
				hook(id)
			}
		}
		return nil
	})
	return r
}

func labels(uid types.UID) map[string]string {
	return map[string]string{container.LabelManagedBy: "true", container.LabelPodUID: string(uid)}
}

// addSandbox adds one of berth's sandboxes of pod uid created age before
// now.
func (r *fakeRuntime) addSandbox(id string, uid types.UID, state runtimeapi.PodSandboxState, age time.Duration) {
	r.AddSandbox(&runtimeapi.PodSandbox{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: string(uid)},
		State:     state,
		CreatedAt: now.Add(-age).UnixNano(),
		Labels:    labels(uid),
	}, "")
}

// addContainer adds one of berth's containers, with its log path and the
// annotations given.
func (r *fakeRuntime) addContainer(id string, uid types.UID, name, sandboxID string, state runtimeapi.ContainerState, age time.Duration, logPath string, annotations ...map[string]string) {
	a := map[string]string{}
	for _, m := range annotations {
		maps.Copy(a, m)
	}
	l := labels(uid)
	l[container.LabelContainerName] = name
	r.AddContainer(&runtimeapi.Container{
		Id:           id,
		PodSandboxId: sandboxID,
		Metadata:     &runtimeapi.ContainerMetadata{Name: name},
		State:        state,
		CreatedAt:    now.Add(-age).UnixNano(),
		Labels:       l,
		Annotations:  a,
	}, &runtimeapi.ContainerStatus{LogPath: logPath})
}

// failing fails a call: the key is "<method> <id>" or, for lists, the
// method's name; a nil err heals it.
func (r *fakeRuntime) failing(key string, err error) { r.Fail(key, err) }

func (r *fakeRuntime) selector(f map[string]string) map[string]string {
	if r.ignoreSelectors {
		return nil
	}
	return f
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
	sel := r.selector(f.GetLabelSelector())
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
	return r.Runtime.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
}

func (r *fakeRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	r.selectors = append(r.selectors, maps.Clone(f.GetLabelSelector()))
	r.inPass--
	sel := r.selector(f.GetLabelSelector())
	r.mu.Unlock()
	return r.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
}

// callList lists the calls that change something, in order.
func (r *fakeRuntime) callList() []string {
	return r.CallsOf("StopContainer", "RemoveContainer", "StopPodSandbox", "RemovePodSandbox")
}

func (r *fakeRuntime) left() (sandboxes, containers []string) {
	return r.Sandboxes(), r.Containers()
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
