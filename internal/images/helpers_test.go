package images

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/testing/fakecri"
)

// t0 is the fake clock's start; image IDs are "sha256:" + a letter repeated.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func id(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func image(c byte, size uint64, tags ...string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id(c), Size: size, RepoTags: tags}
}

// The shared fake runtime is the image service of these tests.
var _ Runtime = (*fakecri.Runtime)(nil)

func newFakeRuntime(clk *clocktesting.FakeClock, images ...*runtimeapi.Image) *fakecri.Runtime {
	r := fakecri.New(clk)
	r.AddImages(images...)
	return r
}

// removedIDs are the images the manager removed (the removals that did not
// fail), in order.
func (e *testEnv) removedIDs() []string { return e.rt.Succeeded("RemoveImage") }

// fakeNode holds what a Manager reads besides the runtime.
type fakeNode struct {
	mu                  sync.Mutex
	capacity, available uint64
	fsErr               error
	fsCalls             int
	inUse               []string
	inUseErr            error
	events              []string // "Type Reason: message"
}

func (n *fakeNode) fsStats(context.Context) (uint64, uint64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fsCalls++
	return n.capacity, n.available, n.fsErr
}

func (n *fakeNode) inUseRefs(context.Context) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.inUse), n.inUseErr
}

func (n *fakeNode) NodeEvent(eventType, reason, message string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, fmt.Sprintf("%s %s: %s", eventType, reason, message))
}

func (n *fakeNode) set(f func(n *fakeNode)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

func (n *fakeNode) eventList() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.events)
}

func (n *fakeNode) reasons() []string {
	var out []string
	for _, e := range n.eventList() {
		_, rest, _ := strings.Cut(e, " ")
		reason, _, _ := strings.Cut(rest, ":")
		out = append(out, reason)
	}
	return out
}

func (n *fakeNode) fsCallCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fsCalls
}

type testEnv struct {
	clk  *clocktesting.FakeClock
	rt   *fakecri.Runtime
	node *fakeNode
	m    *Manager
}

// newEnv makes a manager over a fake runtime holding images, with a 100-byte
// image filesystem 10% used.
func newEnv(t *testing.T, p Policy, images ...*runtimeapi.Image) *testEnv {
	t.Helper()
	e := &testEnv{
		clk:  clocktesting.NewFakeClock(t0),
		node: &fakeNode{capacity: 100, available: 90},
	}
	e.rt = newFakeRuntime(e.clk, images...)
	m, err := NewManager(Options{
		Policy: p, Runtime: e.rt, FsStats: e.node.fsStats, InUse: e.node.inUseRefs,
		SandboxImage: "berth.local/pause:3.10", Pinned: []string{"registry.example/keep:1"},
		Clock: e.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Events: e.node,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

// detect runs a periodic detection and fails the test if it fails.
func (e *testEnv) detect(t *testing.T) {
	t.Helper()
	if err := e.m.detectImages(context.Background(), time.Time{}, true); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) record(t *testing.T, imageID string) imageRecord {
	t.Helper()
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	r, ok := e.m.records[imageID]
	if !ok {
		t.Fatalf("no record of %s", imageID)
	}
	return *r
}
