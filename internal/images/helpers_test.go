package images

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// t0 is the fake clock's start; image IDs are "sha256:" + a letter repeated.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func id(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func image(c byte, size uint64, tags ...string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id(c), Size: size, RepoTags: tags}
}

// fakeRuntime is an image service over a map. It is safe for concurrent use.
type fakeRuntime struct {
	mu        sync.Mutex
	images    map[string]*runtimeapi.Image
	listErr   error
	removeErr map[string]error // by image ID
	removed   []string
	// listed, when set, receives a value at each ListImages call.
	listed chan struct{}
}

func newFakeRuntime(images ...*runtimeapi.Image) *fakeRuntime {
	r := &fakeRuntime{images: map[string]*runtimeapi.Image{}, removeErr: map[string]error{}}
	for _, img := range images {
		r.images[img.Id] = img
	}
	return r
}

func (r *fakeRuntime) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	r.mu.Lock()
	listed := r.listed
	var out []*runtimeapi.Image
	err := r.listErr
	if err == nil {
		for _, k := range slices.Sorted(maps.Keys(r.images)) {
			out = append(out, r.images[k])
		}
	}
	r.mu.Unlock()
	if listed != nil {
		select {
		case listed <- struct{}{}:
		case <-ctx.Done():
		}
	}
	return out, err
}

func (r *fakeRuntime) RemoveImage(_ context.Context, imageID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.removeErr[imageID]; err != nil {
		return err
	}
	delete(r.images, imageID)
	r.removed = append(r.removed, imageID)
	return nil
}

func (r *fakeRuntime) add(images ...*runtimeapi.Image) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, img := range images {
		r.images[img.Id] = img
	}
}

func (r *fakeRuntime) removedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
}

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
	rt   *fakeRuntime
	node *fakeNode
	m    *Manager
}

// newEnv makes a manager over a fake runtime holding images, with a 100-byte
// image filesystem 10% used.
func newEnv(t *testing.T, p Policy, images ...*runtimeapi.Image) *testEnv {
	t.Helper()
	e := &testEnv{
		clk:  clocktesting.NewFakeClock(t0),
		rt:   newFakeRuntime(images...),
		node: &fakeNode{capacity: 100, available: 90},
	}
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
