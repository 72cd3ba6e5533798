package dra

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestWipesDue(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	w := wipes{}.scheduled(wipeAll, t0).scheduled("b.example.com", t0.Add(30*time.Second)).scheduled("a.example.com", t0.Add(10*time.Second))
	if due, next := w.due(t0); !slices.Equal(due, []string{wipeAll}) || next != 10*time.Second {
		t.Errorf("at t0: %q, next in %v", due, next)
	}
	if due, next := w.due(t0.Add(30 * time.Second)); !slices.Equal(due, []string{wipeAll, "a.example.com", "b.example.com"}) || next != 0 {
		t.Errorf("at t0+30s: %q, next in %v", due, next)
	}
	c := w.cancelled("a.example.com")
	if _, ok := c["a.example.com"]; ok || len(w) != 3 || len(c) != 2 {
		t.Errorf("cancelled %v, from %v", c, w)
	}
}

// deletes records the DeleteCollection calls of ResourceSlices by field
// selector, failing the first fail of them.
type deletes struct {
	mu    sync.Mutex
	calls []string
	fail  int
}

func (d *deletes) react(a k8stesting.Action) (bool, runtime.Object, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dc := a.(k8stesting.DeleteCollectionAction)
	d.calls = append(d.calls, dc.GetListRestrictions().Fields.String())
	if d.fail > 0 {
		d.fail--
		return true, nil, errors.New("etcd is having a moment")
	}
	return true, nil, nil
}

func (d *deletes) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// At start every driver's slices of the node go (tried again after a
// failure); a driver whose registration goes loses its slices after the
// delay unless it registers again within it.
func TestSliceWiper(t *testing.T) {
	client := fake.NewClientset()
	d := &deletes{fail: 1}
	client.PrependReactor("delete-collection", "resourceslices", d.react)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	w := NewSliceWiper(client, "n1", clk, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	all := "spec.nodeName=n1"
	waitCalls := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Equal(d.list(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("calls %q, want %q", d.list(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitCalls(all)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(wipeRetryInitial)
	waitCalls(all, all)

	h := w.Handler(NewPlugins(nil, 0))
	a := startDriver(t, shortTempDir(t), "a.sock", "a.example.com")
	if err := h.RegisterPlugin(ctx, "a.example.com", a.sock, a.versions); err != nil {
		t.Fatal(err)
	}
	// Gone and back within the delay: nothing deleted.
	h.DeRegisterPlugin(ctx, "a.example.com", a.sock)
	clk.Step(DefaultWipeDelay / 2)
	if err := h.RegisterPlugin(ctx, "a.example.com", a.sock, a.versions); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultWipeDelay)
	// Gone for good: deleted after the delay, not before.
	h.DeRegisterPlugin(ctx, "b.example.com", "/y")
	clk.Step(DefaultWipeDelay - time.Second)
	time.Sleep(20 * time.Millisecond)
	waitCalls(all, all)
	clk.Step(time.Second)
	waitCalls(all, all, "spec.driver=b.example.com,spec.nodeName=n1")
}
