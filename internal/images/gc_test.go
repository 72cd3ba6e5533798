package images

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestGarbageCollect(t *testing.T) {
	maxAgePolicy := DefaultPolicy()
	maxAgePolicy.MaxAge = 2 * time.Hour
	busybox := &runtimeapi.Image{Id: id('b'), Size: 30, RepoTags: []string{"docker.io/library/busybox:latest"}}
	digested := &runtimeapi.Image{Id: id('d'), Size: 30, RepoDigests: []string{"berth.local/app@" + id('e')}}
	tests := []struct {
		name    string
		policy  Policy
		images  []*runtimeapi.Image
		prepare func(t *testing.T, e *testEnv) // after a first periodic detection at t0
		// capacity and available are the image filesystem's, read after the
		// max-age removals.
		capacity, available uint64
		wantRemoved         []string
		wantErr             string // a substring; "" for no error
		wantEvents          []string
	}{
		{
			name:     "below the high threshold: nothing",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('a', 10), image('b', 10)},
			capacity: 100, available: 16,
		},
		{
			name:     "at the high threshold: free down to the low one, in ID order for images equally old",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('c', 6), image('a', 6), image('b', 6)},
			capacity: 100, available: 15, // 85%: free 20-15 = 5
			wantRemoved: []string{id('a')},
			wantEvents:  []string{"Normal ImageGarbageCollected: Removed image sha256:aaaaaaaaaaaa (6 B): freeing disk: image filesystem at 85% >= 85%"},
		},
		{
			name:     "stops once enough is freed",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('a', 6, "docker.io/library/a:1"), image('b', 6), image('c', 6)},
			capacity: 100, available: 9, // 91%: free 11
			wantRemoved: []string{id('a'), id('b')},
			wantEvents: []string{
				"Normal ImageGarbageCollected: Removed image a:1 (sha256:aaaaaaaaaaaa, 6 B): freeing disk: image filesystem at 91% >= 85%",
				"Normal ImageGarbageCollected: Removed image sha256:bbbbbbbbbbbb (6 B): freeing disk: image filesystem at 91% >= 85%",
			},
		},
		{
			name:   "least recently used first",
			policy: DefaultPolicy(),
			images: []*runtimeapi.Image{image('a', 10, "docker.io/library/a:1"), image('b', 10, "docker.io/library/b:1"), image('c', 10, "docker.io/library/c:1")},
			prepare: func(t *testing.T, e *testEnv) {
				// a used an hour ago, c ten minutes ago, b never.
				e.node.set(func(n *fakeNode) { n.inUse = []string{"a:1", "c:1"} })
				e.clk.Step(time.Minute)
				e.detect(t)
				e.node.set(func(n *fakeNode) { n.inUse = []string{"c:1"} })
				e.clk.Step(50 * time.Minute)
				e.detect(t)
				e.node.set(func(n *fakeNode) { n.inUse = nil })
				e.clk.Step(10 * time.Minute)
			},
			capacity: 100, available: 0, // free 20
			wantRemoved: []string{id('b'), id('a')},
			wantEvents:  []string{"ImageGarbageCollected", "ImageGarbageCollected"},
		},
		{
			name:   "images in use by ID, tag, short name or digest stay; FreeDiskSpaceFailed",
			policy: DefaultPolicy(),
			images: []*runtimeapi.Image{image('a', 30), busybox, image('c', 30, "berth.local/c:1"), digested, image('f', 5)},
			prepare: func(t *testing.T, e *testEnv) {
				e.node.set(func(n *fakeNode) {
					n.inUse = []string{id('a'), "busybox", "berth.local/c:1", "berth.local/app@" + id('e')}
				})
			},
			capacity: 100, available: 0,
			wantRemoved: []string{id('f')},
			wantErr:     "failed to garbage collect required amount of images. Wanted to free 20 bytes, but freed 5 bytes",
			wantEvents: []string{
				"Normal ImageGarbageCollected: Removed image sha256:ffffffffffff (5 B): freeing disk: image filesystem at 100% >= 85%",
				"Warning FreeDiskSpaceFailed: failed to garbage collect required amount of images. Wanted to free 20 bytes, but freed 5 bytes",
			},
		},
		{
			name:   "pinned images stay: by the runtime, the sandbox image, configured ones",
			policy: DefaultPolicy(),
			images: []*runtimeapi.Image{
				{Id: id('a'), Size: 30, Pinned: true},
				image('b', 30, "berth.local/pause:3.10"),
				image('c', 30, "registry.example/keep:1"),
			},
			capacity: 100, available: 0,
			wantErr: "Wanted to free 20 bytes, but freed 0 bytes",
			wantEvents: []string{
				"Warning FreeDiskSpaceFailed: failed to garbage collect required amount of images. Wanted to free 20 bytes, but freed 0 bytes",
			},
		},
		{
			name:   "images younger than the minimum age stay",
			policy: DefaultPolicy(),
			images: []*runtimeapi.Image{image('a', 30)},
			prepare: func(t *testing.T, e *testEnv) {
				e.clk.Step(10 * time.Minute)
				e.rt.AddImages(image('b', 30), image('c', 30))
				e.detect(t) // b and c detected now
				e.clk.Step(time.Minute)
			},
			capacity: 100, available: 0,
			wantRemoved: []string{id('a')},
			wantEvents:  []string{"ImageGarbageCollected"},
		},
		{
			name:     "one removal fails: the others go on, the error is aggregated, no FreeDiskSpaceFailed (the seed)",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('a', 10), image('b', 10), image('c', 10)},
			prepare:  func(t *testing.T, e *testEnv) { e.rt.Fail("RemoveImage "+id('a'), errors.New("image is busy")) },
			capacity: 100, available: 0,
			wantRemoved: []string{id('b'), id('c')},
			wantErr:     "wanted to free 20 bytes, but freed 20 bytes space with errors in image deletion: remove image " + id('a') + ": image is busy",
			wantEvents:  []string{"ImageGarbageCollected", "ImageGarbageCollected"},
		},
		{
			name:     "capacity 0: InvalidDiskCapacity",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('a', 10)},
			capacity: 0, available: 0,
			wantErr:    "invalid capacity 0 on image filesystem",
			wantEvents: []string{"Warning InvalidDiskCapacity: invalid capacity 0 on image filesystem"},
		},
		{
			name:     "available above capacity is clamped: usage 0%",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('a', 10)},
			capacity: 100, available: 500,
		},
		{
			name:     "filesystem stats fail: nothing removed",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('a', 10)},
			prepare:  func(t *testing.T, e *testEnv) { e.node.fsErr = errors.New("no image filesystem") },
			capacity: 100, available: 0,
			wantErr: "image filesystem stats: no image filesystem",
		},
		{
			name:   "images in use unknown: nothing removed, whatever the disk and the ages",
			policy: maxAgePolicy,
			images: []*runtimeapi.Image{image('a', 10), image('b', 10)},
			prepare: func(t *testing.T, e *testEnv) {
				e.clk.Step(5 * time.Hour)
				e.node.set(func(n *fakeNode) { n.inUseErr = errors.New("cannot list containers") })
			},
			capacity: 100, available: 0,
			wantErr: "list images in use: cannot list containers",
		},
		{
			name:     "images unknown: nothing removed",
			policy:   DefaultPolicy(),
			images:   []*runtimeapi.Image{image('a', 10)},
			prepare:  func(t *testing.T, e *testEnv) { e.rt.Fail("ListImages", errors.New("runtime down")) },
			capacity: 100, available: 0,
			wantErr: "list images: runtime down",
		},
		{
			name:   "older than the maximum age: removed whatever the disk usage",
			policy: maxAgePolicy,
			images: []*runtimeapi.Image{image('a', 10, "docker.io/library/a:1"), image('b', 10), image('c', 10)},
			prepare: func(t *testing.T, e *testEnv) {
				e.node.set(func(n *fakeNode) { n.inUse = []string{"a:1", id('c')} })
				e.detect(t)
				e.node.set(func(n *fakeNode) { n.inUse = []string{id('c')} })
				e.clk.Step(3 * time.Hour)
			},
			capacity: 100, available: 90,
			wantRemoved: []string{id('b'), id('a')},
			wantEvents: []string{
				"Normal ImageGarbageCollected: Removed image sha256:bbbbbbbbbbbb (10 B): unused since berth started 3h ago, over imageMaximumGCAge 2h",
				"Normal ImageGarbageCollected: Removed image a:1 (sha256:aaaaaaaaaaaa, 10 B): unused for 3h, over imageMaximumGCAge 2h",
			},
		},
		{
			name:   "not before berth has run for the maximum age",
			policy: maxAgePolicy,
			images: []*runtimeapi.Image{image('a', 10)},
			prepare: func(t *testing.T, e *testEnv) {
				e.clk.Step(2 * time.Hour)
			},
			capacity: 100, available: 90,
		},
		{
			name:   "maximum age, then space: a failed age removal neither stops the space pass nor is tried again in it",
			policy: maxAgePolicy,
			images: []*runtimeapi.Image{image('a', 10), image('b', 10)},
			prepare: func(t *testing.T, e *testEnv) {
				e.rt.Fail("RemoveImage "+id('a'), errors.New("image is busy"))
				e.clk.Step(10 * time.Minute)
				e.rt.AddImages(image('c', 10))
				e.detect(t)
				e.clk.Step(2 * time.Hour)
				e.node.set(func(n *fakeNode) { n.inUse = nil })
			},
			capacity: 100, available: 0,
			wantRemoved: []string{id('b'), id('c')},
			wantErr:     "wanted to free images older than 2h, encountered errors in image deletion: remove image " + id('a') + ": image is busy",
			wantEvents: []string{
				"Normal ImageGarbageCollected: Removed image sha256:bbbbbbbbbbbb (10 B): unused since berth started 2h10m ago, over imageMaximumGCAge 2h",
				"Normal ImageGarbageCollected: Removed image sha256:cccccccccccc (10 B): freeing disk: image filesystem at 100% >= 85%",
				"Warning FreeDiskSpaceFailed: failed to garbage collect required amount of images. Wanted to free 20 bytes, but freed 10 bytes",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.policy, tt.images...)
			e.detect(t)
			if tt.prepare != nil {
				tt.prepare(t, e)
			}
			e.node.set(func(n *fakeNode) { n.capacity, n.available = tt.capacity, tt.available })
			err := e.m.GarbageCollect(context.Background())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("GarbageCollect() = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("GarbageCollect() = %v, want an error containing %q", err, tt.wantErr)
			}
			if got := e.removedIDs(); !slices.Equal(got, tt.wantRemoved) {
				t.Errorf("removed %q, want %q", got, tt.wantRemoved)
			}
			checkEvents(t, e.node, tt.wantEvents)
		})
	}
}

// checkEvents compares events in full, or only their reasons where want
// gives just a reason.
func checkEvents(t *testing.T, n *fakeNode, want []string) {
	t.Helper()
	got, reasons := n.eventList(), n.reasons()
	if len(got) != len(want) {
		t.Errorf("events = %q, want %q", got, want)
		return
	}
	for i := range want {
		if want[i] != got[i] && want[i] != reasons[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// The amount is the seed's even when rounding makes it negative: then
// nothing needs freeing, and nothing goes.
func TestGarbageCollectNothingToFree(t *testing.T) {
	e := newEnv(t, Policy{HighThresholdPercent: 85, LowThresholdPercent: 85}, image('a', 10))
	e.detect(t)
	e.node.set(func(n *fakeNode) { n.capacity, n.available = 1000, 159 }) // 85%, free -9
	if err := e.m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.removedIDs(); len(got) != 0 {
		t.Errorf("removed %q with nothing to free", got)
	}
}

// A removed image's record goes, and the metrics count it.
func TestGarbageCollectForgetsAndCounts(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', 30), image('b', 30))
	e.rt.Fail("RemoveImage "+id('a'), errors.New("busy"))
	e.detect(t)
	e.node.set(func(n *fakeNode) { n.capacity, n.available = 100, 0 })
	_ = e.m.GarbageCollect(context.Background())
	if got := ids(e.m.snapshot()); !slices.Equal(got, []string{id('a')}) {
		t.Errorf("records after GC = %q, want only the image that failed to go", got)
	}
	if got := counterValue(t, e.m.metrics.collected.WithLabelValues(reasonSpace)); got != 1 {
		t.Errorf("image_garbage_collected_total{reason=space} = %v, want 1", got)
	}
	if got := counterValue(t, e.m.metrics.errors.WithLabelValues(opRemove)); got != 1 {
		t.Errorf("errors_total{operation=remove_image} = %v, want 1", got)
	}
}

// A detection that runs between the GC's choice and a removal, and finds the
// image taken into use, saves it.
func TestGarbageCollectRechecksBeforeRemoving(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', 10), image('b', 10, "docker.io/library/b:1"))
	e.detect(t)
	e.node.set(func(n *fakeNode) { n.capacity, n.available = 100, 0 })
	// a's removal is the moment b is taken into use.
	e.rt.OnCall(func(_ context.Context, call string) error {
		if call == "RemoveImage "+id('a') {
			e.node.set(func(n *fakeNode) { n.inUse = []string{"b:1"} })
			e.clk.Step(time.Second)
			e.detect(t)
		}
		return nil
	})
	_ = e.m.GarbageCollect(context.Background())
	if got := e.removedIDs(); !slices.Equal(got, []string{id('a')}) {
		t.Errorf("removed %q, want only a: b was taken into use", got)
	}
}

func TestDeleteUnusedImages(t *testing.T) {
	tests := []struct {
		name        string
		policy      Policy
		prepare     func(t *testing.T, e *testEnv)
		wantRemoved []string
		wantFreed   int64
		wantErr     string
	}{
		{
			name:        "every unused, unpinned image old enough, whatever the thresholds",
			policy:      DefaultPolicy(),
			wantRemoved: []string{id('a'), id('b')},
			wantFreed:   30,
		},
		{
			name:        "also when the periodic GC is off",
			policy:      Policy{HighThresholdPercent: 100, LowThresholdPercent: 100, MinAge: 2 * time.Minute},
			wantRemoved: []string{id('a'), id('b')},
			wantFreed:   30,
		},
		{
			name:        "a failed removal: the others go, the freed bytes are still returned",
			policy:      DefaultPolicy(),
			prepare:     func(t *testing.T, e *testEnv) { e.rt.Fail("RemoveImage "+id('a'), errors.New("busy")) },
			wantRemoved: []string{id('b')},
			wantFreed:   20,
			wantErr:     "freed 20 bytes with errors in image deletion: remove image " + id('a') + ": busy",
		},
		{
			name:   "images in use unknown: nothing",
			policy: DefaultPolicy(),
			prepare: func(t *testing.T, e *testEnv) {
				e.node.set(func(n *fakeNode) { n.inUseErr = errors.New("no containers") })
			},
			wantErr: "list images in use: no containers",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.policy,
				image('a', 10), image('b', 20), image('c', 40, "docker.io/library/c:1"), // c in use
				image('p', 80, "berth.local/pause:3.10"), &runtimeapi.Image{Id: id('r'), Size: 160, Pinned: true})
			e.node.set(func(n *fakeNode) { n.inUse = []string{"c:1"} })
			e.detect(t)
			e.clk.Step(time.Hour)
			e.rt.AddImages(image('y', 320)) // young: detected by DeleteUnusedImages itself
			if tt.prepare != nil {
				tt.prepare(t, e)
			}
			freed, err := e.m.DeleteUnusedImages(context.Background())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("DeleteUnusedImages() = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("DeleteUnusedImages() = %v, want an error containing %q", err, tt.wantErr)
			}
			if freed != tt.wantFreed {
				t.Errorf("freed %d bytes, want %d", freed, tt.wantFreed)
			}
			if got := e.removedIDs(); !slices.Equal(got, tt.wantRemoved) {
				t.Errorf("removed %q, want %q", got, tt.wantRemoved)
			}
			if e.node.fsCallCount() != 0 {
				t.Error("DeleteUnusedImages read the filesystem stats: it must not depend on thresholds")
			}
		})
	}
}

// The eviction path frees everything: its budget is unbounded.
func TestDeleteUnusedImagesBudget(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', math.MaxInt64/2), image('b', math.MaxInt64/2))
	e.detect(t)
	freed, err := e.m.DeleteUnusedImages(context.Background())
	if err != nil || freed != math.MaxInt64/2*2 {
		t.Errorf("DeleteUnusedImages() = %d, %v; want both images freed", freed, err)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
