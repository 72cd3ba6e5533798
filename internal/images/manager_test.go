package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runner drives a Manager's Run: each detection or GC lists the images once,
// and the test waits for that list before it looks or moves the clock.
type runner struct {
	e      *testEnv
	listed chan struct{}
	stop   func()
}

func (e *testEnv) start(t *testing.T) *runner {
	t.Helper()
	r := &runner{e: e, listed: make(chan struct{}, 1000)}
	e.rt.AfterList(func(ctx context.Context, _ string) {
		select {
		case r.listed <- struct{}{}:
		case <-ctx.Done():
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.m.Run(ctx)
	}()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(r.stop)
	return r
}

// waitList waits for the next list of images.
func (r *runner) waitList(t *testing.T) {
	t.Helper()
	select {
	case <-r.listed:
	case <-time.After(10 * time.Second):
		t.Fatal("the manager listed no images")
	}
}

// tick moves the clock one ImageListPeriod and waits for the round it
// starts. When it returns, every earlier round has finished.
func (r *runner) tick(t *testing.T, n int) {
	t.Helper()
	for range n {
		r.e.clk.Step(ImageListPeriod)
		r.waitList(t)
	}
}

// Run detects at once and every ImageListPeriod, and collects at once and
// every ImageGCPeriod.
func TestRunPeriods(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', 10))
	r := e.start(t)
	r.waitList(t) // the first detection
	r.waitList(t) // the first GC
	r.tick(t, 1)
	if got := e.node.fsCallCount(); got != 1 {
		t.Fatalf("GC rounds at start = %d, want 1", got)
	}
	if got := e.record(t, id('a')).firstDetected; !got.IsZero() {
		t.Errorf("image present at start: firstDetected = %v, want the zero time", got)
	}
	e.rt.AddImages(image('b', 10))
	r.tick(t, 8) // 4m30s
	if got := e.node.fsCallCount(); got != 1 {
		t.Errorf("GC rounds before ImageGCPeriod = %d, want 1", got)
	}
	if got, want := e.record(t, id('b')).firstDetected, t0.Add(ImageListPeriod*2); !got.Equal(want) {
		t.Errorf("image added later: firstDetected = %v, want %v (the next detection)", got, want)
	}
	r.tick(t, 2) // 5m: GC; 5m30s
	if got := e.node.fsCallCount(); got != 2 {
		t.Errorf("GC rounds after ImageGCPeriod = %d, want 2", got)
	}
	r.tick(t, 10) // 10m30s
	if got := e.node.fsCallCount(); got != 3 {
		t.Errorf("GC rounds after 2 ImageGCPeriods = %d, want 3", got)
	}
}

// As in the kubelet, one failure is only logged; a second in a row is an
// ImageGCFailed event, and a success resets the count.
func TestRunImageGCFailedOnlyWhenRepeated(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', 10))
	e.node.set(func(n *fakeNode) { n.fsErr = errors.New("boom") })
	r := e.start(t)
	r.waitList(t)
	r.waitList(t) // GC 1 fails
	r.tick(t, 1)
	if got := e.node.eventList(); len(got) != 0 {
		t.Errorf("events after one failure = %q, want none", got)
	}
	r.tick(t, 10) // GC 2 fails
	checkEvents(t, e.node, []string{"Warning ImageGCFailed: image filesystem stats: boom"})
	e.node.set(func(n *fakeNode) { n.fsErr = nil })
	r.tick(t, 10) // GC 3 succeeds
	e.node.set(func(n *fakeNode) { n.fsErr = errors.New("boom again") })
	r.tick(t, 10) // GC 4 fails, once
	checkEvents(t, e.node, []string{"ImageGCFailed"})
	r.tick(t, 10) // GC 5 fails again
	checkEvents(t, e.node, []string{"ImageGCFailed", "Warning ImageGCFailed: image filesystem stats: boom again"})
}

// Failures are retried at the next period: a runtime that comes back is
// detected and collected.
func TestRunRetriesAfterRuntimeErrors(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', 10))
	e.rt.Fail("ListImages", errors.New("runtime down"))
	e.node.set(func(n *fakeNode) { n.capacity, n.available = 100, 0 })
	r := e.start(t)
	r.waitList(t)
	r.waitList(t)
	r.tick(t, 1)
	if len(e.m.snapshot()) != 0 || len(e.removedIDs()) != 0 {
		t.Fatal("the manager recorded or removed images while the runtime was down")
	}
	e.rt.Fail("ListImages", nil)
	r.tick(t, 2) // detects at 1m; 1m30s
	if got := e.record(t, id('a')).firstDetected; !got.IsZero() {
		t.Errorf("firstDetected after the first successful detection = %v, want the zero time", got)
	}
	r.tick(t, 8) // GC at 5m; 5m30s
	if got := e.removedIDs(); !slices.Equal(got, []string{id('a')}) {
		t.Errorf("removed %q, want the unused image", got)
	}
}

// With imageGCHighThresholdPercent 100 and no maximum age, Run only
// detects; the eviction path still removes unused images.
func TestRunWithGCOff(t *testing.T) {
	e := newEnv(t, Policy{HighThresholdPercent: 100, LowThresholdPercent: 100, MinAge: 2 * time.Minute}, image('a', 10), image('b', 20))
	e.node.set(func(n *fakeNode) { n.capacity, n.available = 100, 0 }) // full
	r := e.start(t)
	r.waitList(t)
	r.tick(t, 2*int(ImageGCPeriod/ImageListPeriod)+1)
	if got := e.node.fsCallCount(); got != 0 {
		t.Errorf("GC rounds with the GC off = %d, want 0", got)
	}
	if got := e.removedIDs(); len(got) != 0 {
		t.Errorf("removed %q with the GC off", got)
	}
	freed, err := e.m.DeleteUnusedImages(context.Background())
	r.waitList(t)
	if err != nil || freed != 30 {
		t.Errorf("DeleteUnusedImages() = %d, %v; want 30 bytes freed", freed, err)
	}
	if got := e.removedIDs(); !slices.Equal(got, []string{id('a'), id('b')}) {
		t.Errorf("removed %q, want both images", got)
	}
}

// With imageGCHighThresholdPercent 100 but a maximum age, Run collects
// periodically, as the kubelet does.
func TestRunWithOnlyMaxAge(t *testing.T) {
	e := newEnv(t, Policy{HighThresholdPercent: 100, LowThresholdPercent: 100, MinAge: time.Minute, MaxAge: 3 * time.Minute}, image('a', 10))
	r := e.start(t)
	r.waitList(t)
	r.waitList(t)
	r.tick(t, 11) // GC at 5m, when berth has run longer than the maximum age; 5m30s
	if got := e.removedIDs(); !slices.Equal(got, []string{id('a')}) {
		t.Errorf("removed %q, want the image unused since start", got)
	}
}

func TestImages(t *testing.T) {
	p := DefaultPolicy()
	p.MaxAge = 2 * time.Hour
	e := newEnv(t, p,
		image('a', 1),
		image('b', 2, "docker.io/library/b:1"),
		image('c', 3, "docker.io/library/c:1"),
		image('p', 4, "berth.local/pause:3.10"),
		&runtimeapi.Image{Id: id('r'), Size: 5, Pinned: true},
	)
	e.node.set(func(n *fakeNode) { n.inUse = []string{"c:1"} })
	e.detect(t)
	e.clk.Step(time.Minute)
	e.node.set(func(n *fakeNode) { n.inUse = []string{"c:1", "b:1"} })
	e.detect(t) // b used at t0+1m
	e.node.set(func(n *fakeNode) { n.inUse = []string{"c:1"} })
	e.clk.Step(2 * time.Hour)
	e.rt.AddImages(image('d', 6))
	e.detect(t) // d detected at t0+2h1m
	e.clk.Step(time.Hour)
	e.rt.AddImages(image('y', 7)) // detected by Images, at t0+3h1m
	now := t0.Add(3*time.Hour + time.Minute)

	got, err := e.m.Images(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []ImageStatus{
		{ID: id('a'), Size: 1, Verdict: "older than imageMaximumGCAge (unused since berth started): removed at the next GC"},
		{ID: id('p'), Size: 4, RepoTags: []string{"berth.local/pause:3.10"}, Pinned: true, Verdict: "pinned (sandbox image)"},
		{ID: id('r'), Size: 5, Pinned: true, Verdict: "pinned (by the runtime)"},
		{ID: id('d'), Size: 6, FirstDetected: t0.Add(2*time.Hour + time.Minute), Verdict: "collectable: least recently used first"},
		{ID: id('y'), Size: 7, FirstDetected: now, Verdict: "younger than imageMinimumGCAge (2m left)"},
		{ID: id('b'), Size: 2, RepoTags: []string{"docker.io/library/b:1"}, LastUsed: t0.Add(time.Minute),
			Verdict: "older than imageMaximumGCAge (unused for 3h): removed at the next GC"},
		{ID: id('c'), Size: 3, RepoTags: []string{"docker.io/library/c:1"}, LastUsed: now, InUse: true, Verdict: "in use by a container or pod"},
	}
	if len(got) != len(want) {
		t.Fatalf("Images() returned %d images, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if fmt.Sprintf("%+v", got[i]) != fmt.Sprintf("%+v", want[i]) {
			t.Errorf("image %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}

	// The local API's JSON leaves out the times that are unknown.
	raw, err := json.Marshal(got[0])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(raw); strings.Contains(s, "firstDetected") || strings.Contains(s, "lastUsed") || !strings.Contains(s, `"verdict":"older than imageMaximumGCAge`) {
		t.Errorf("JSON of an image present at start = %s", s)
	}
	raw, _ = json.Marshal(got[6])
	if s := string(raw); !strings.Contains(s, `"lastUsed":"2025-06-01T15:01:00Z"`) || !strings.Contains(s, `"inUse":true`) {
		t.Errorf("JSON of an image in use = %s", s)
	}
}

func TestImagesFailsWithoutTheRuntime(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', 1))
	e.rt.Fail("ListImages", errors.New("runtime down"))
	if _, err := e.m.Images(context.Background()); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("Images() error = %v, want the runtime's", err)
	}
}

// GC, the eviction path, the periodic detection and Images may run at once;
// the image in use is never removed. Run with -race.
func TestConcurrentUse(t *testing.T) {
	e := newEnv(t, Policy{HighThresholdPercent: 0, LowThresholdPercent: 0}, image('c', 1, "docker.io/library/c:1"))
	e.node.set(func(n *fakeNode) { n.inUse = []string{"c:1"}; n.capacity, n.available = 100, 0 })
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 5 {
		wg.Go(func() {
			for i := range 40 {
				switch g {
				case 0:
					e.rt.AddImages(image(byte('d'+i%20), uint64(i)))
					e.clk.Step(time.Second)
				case 1:
					_ = e.m.GarbageCollect(ctx)
				case 2:
					_, _ = e.m.DeleteUnusedImages(ctx)
				case 3:
					_ = e.m.detectImages(ctx, time.Time{}, true)
				case 4:
					_, _ = e.m.Images(ctx)
				}
			}
		})
	}
	wg.Wait()
	if slices.Contains(e.removedIDs(), id('c')) {
		t.Error("the image in use was removed")
	}
}
