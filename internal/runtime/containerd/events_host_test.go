package containerd

import (
	"context"
	"slices"
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// WatchTasks must follow containerd across a restart: the stream breaks,
// and events published by the new containerd arrive again.
func TestWatchTasksFollowsContainerdRestart(t *testing.T) {
	root := testRoot(t)
	m := startManaged(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	got := make(chan TaskEvent, 64)
	watchCtx, stopWatch := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- WatchTasks(watchCtx, m.Address(), testLogger(t), func(ev TaskEvent) { got <- ev }) }()
	defer func() {
		stopWatch()
		if err := <-done; err != nil {
			t.Errorf("WatchTasks: %v", err)
		}
	}()

	// There is no signal for "subscribed": publish until an event arrives.
	// Copies of an earlier one may still arrive after it.
	var earlier []string
	expect := func(m *Managed, id string) {
		t.Helper()
		c, err := newClient(m.Address())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pubCtx := namespaces.WithNamespace(ctx, criNamespace)
		ticker := time.NewTicker(20 * time.Millisecond)
		defer ticker.Stop()
		for {
			if err := c.EventService().Publish(pubCtx, TopicTaskDelete, &apievents.TaskDelete{ContainerID: id}); err != nil {
				t.Fatalf("publish: %v", err)
			}
			select {
			case ev := <-got:
				if ev.ContainerID == id && ev.Topic == TopicTaskDelete {
					earlier = append(earlier, id)
					return
				}
				if !slices.Contains(earlier, ev.ContainerID) {
					t.Errorf("unexpected event %+v", ev)
				}
			case <-ticker.C:
			case <-ctx.Done():
				t.Fatalf("no event for %s", id)
			}
		}
	}
	expect(m, "before-restart")
	stopManaged(t, m)
	restarted := startManaged(t, root)
	expect(restarted, "after-restart")
}
