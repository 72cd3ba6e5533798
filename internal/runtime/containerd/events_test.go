package containerd

import (
	"context"
	"errors"
	"github.com/containerd/containerd/v2/pkg/filters"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"
)

func envelope(t *testing.T, topic string, payload any, at time.Time) *events.Envelope {
	t.Helper()
	anyEvent, err := typeurl.MarshalAny(payload)
	if err != nil {
		t.Fatal(err)
	}
	return &events.Envelope{Timestamp: at, Namespace: criNamespace, Topic: topic, Event: anyEvent}
}

func TestToTaskEvent(t *testing.T) {
	published := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exited := published.Add(-time.Millisecond)
	for _, tc := range []struct {
		name    string
		topic   string
		payload any
		want    TaskEvent
		wantOK  bool
	}{
		{"exit", TopicTaskExit, &apievents.TaskExit{ContainerID: "c1", ID: "c1", Pid: 7, ExitStatus: 3, ExitedAt: timestamppb.New(exited)},
			TaskEvent{Topic: TopicTaskExit, ContainerID: "c1", ExitCode: 3, At: exited}, true},
		{"exit without time", TopicTaskExit, &apievents.TaskExit{ContainerID: "c1", ID: "c1", ExitStatus: 137},
			TaskEvent{Topic: TopicTaskExit, ContainerID: "c1", ExitCode: 137, At: published}, true},
		{"exec exit", TopicTaskExit, &apievents.TaskExit{ContainerID: "c1", ID: "probe-1", ExitStatus: 1}, TaskEvent{}, false},
		{"delete", TopicTaskDelete, &apievents.TaskDelete{ContainerID: "c1", ExitStatus: 2, ExitedAt: timestamppb.New(exited)},
			TaskEvent{Topic: TopicTaskDelete, ContainerID: "c1", ExitCode: 2, At: exited}, true},
		{"exec delete", TopicTaskDelete, &apievents.TaskDelete{ContainerID: "c1", ID: "probe-1"}, TaskEvent{}, false},
		{"start", TopicTaskStart, &apievents.TaskStart{ContainerID: "c1", Pid: 7},
			TaskEvent{Topic: TopicTaskStart, ContainerID: "c1", At: published}, true},
		{"create", TopicTaskCreate, &apievents.TaskCreate{ContainerID: "c1"},
			TaskEvent{Topic: TopicTaskCreate, ContainerID: "c1", At: published}, true},
		{"oom", TopicTaskOOM, &apievents.TaskOOM{ContainerID: "c1"},
			TaskEvent{Topic: TopicTaskOOM, ContainerID: "c1", At: published}, true},
		{"paused", TopicTaskPaused, &apievents.TaskPaused{ContainerID: "c1"},
			TaskEvent{Topic: TopicTaskPaused, ContainerID: "c1", At: published}, true},
		{"exec added", "/tasks/exec-added", &apievents.TaskExecAdded{ContainerID: "c1", ExecID: "x"}, TaskEvent{}, false},
		{"not a task event", "/images/create", &apievents.ImageCreate{Name: "x"}, TaskEvent{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := toTaskEvent(envelope(t, tc.topic, tc.payload, published))
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK || !got.At.Equal(tc.want.At) || got.Topic != tc.want.Topic ||
				got.ContainerID != tc.want.ContainerID || got.ExitCode != tc.want.ExitCode {
				t.Errorf("toTaskEvent = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}

	if _, _, err := toTaskEvent(envelope(t, TopicTaskStart, &apievents.TaskStart{}, published)); err == nil {
		t.Error("an event without a container ID is accepted")
	}
	if _, _, err := toTaskEvent(&events.Envelope{Topic: TopicTaskExit}); err == nil {
		t.Error("an event without a payload is accepted")
	}
}

// fakeSubscriber hands each subscription to the test, which then plays the
// server's side of the stream.
type fakeSubscriber struct{ subscribed chan fakeStream }

type fakeStream struct {
	filters []string
	ch      chan *events.Envelope
	errs    chan error
}

func (f *fakeSubscriber) Subscribe(ctx context.Context, filters ...string) (<-chan *events.Envelope, <-chan error) {
	s := fakeStream{filters: filters, ch: make(chan *events.Envelope), errs: make(chan error, 1)}
	f.subscribed <- s
	return s.ch, s.errs
}

func TestWatchTasksResubscribesWithBackoff(t *testing.T) {
	sub := &fakeSubscriber{subscribed: make(chan fakeStream)}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	got := make(chan TaskEvent, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { done <- watchTasks(ctx, sub, clk, log, func(ev TaskEvent) { got <- ev }) }()

	next := func() fakeStream {
		t.Helper()
		select {
		case s := <-sub.subscribed:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("watchTasks did not subscribe")
			return fakeStream{}
		}
	}
	waitForTimer := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("watchTasks does not wait for its back-off")
			}
			time.Sleep(time.Millisecond)
		}
	}

	s1 := next()
	if !slices.Equal(s1.filters, taskFilters()) {
		t.Errorf("filters = %q, want %q", s1.filters, taskFilters())
	}
	s1.ch <- envelope(t, TopicTaskExit, &apievents.TaskExit{ContainerID: "c1", ID: "exec", ExitStatus: 1}, clk.Now())
	s1.ch <- envelope(t, TopicTaskExit, &apievents.TaskExit{ContainerID: "c1", ID: "c1", ExitStatus: 3}, clk.Now())
	if ev := <-got; ev.ContainerID != "c1" || ev.ExitCode != 3 {
		t.Errorf("first event = %+v, want c1's exit 3 (the exec exit left out)", ev)
	}

	// The stream breaks: subscribe again after the minimum back-off.
	s1.errs <- errors.New("connection reset")
	waitForTimer()
	clk.Step(watchMinBackoff)
	s2 := next()

	// It breaks again before delivering anything: the back-off doubles.
	s2.errs <- errors.New("connection refused")
	waitForTimer()
	clk.Step(watchMinBackoff)
	if !clk.HasWaiters() {
		t.Fatal("resubscribed after the minimum back-off twice in a row")
	}
	clk.Step(watchMinBackoff)
	s3 := next()
	s3.ch <- envelope(t, TopicTaskStart, &apievents.TaskStart{ContainerID: "c2"}, clk.Now())
	if ev := <-got; ev.ContainerID != "c2" || ev.Topic != TopicTaskStart {
		t.Errorf("event after resubscribing = %+v", ev)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watchTasks returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watchTasks does not return after cancel")
	}
}

// The subscription's filters, as containerd evaluates them, pass the CRI
// namespace's task events berth acts on and nothing else.
func TestTaskFilters(t *testing.T) {
	f, err := filters.ParseAll(taskFilters()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic, namespace string
		want             bool
	}{
		{TopicTaskExit, criNamespace, true},
		{TopicTaskStart, criNamespace, false},
		{TopicTaskCreate, criNamespace, false},
		{TopicTaskOOM, criNamespace, true},
		{TopicTaskDelete, criNamespace, true},
		{"/tasks/exec-added", criNamespace, false},
		{"/tasks/exec-started", criNamespace, false},
		{"/images/create", criNamespace, false},
		{"/snapshot/prepare", criNamespace, false},
		{TopicTaskExit, "moby", false},
	} {
		env := &events.Envelope{Topic: tc.topic, Namespace: tc.namespace}
		if got := f.Match(env); got != tc.want {
			t.Errorf("%s in %s: matched %v, want %v", tc.topic, tc.namespace, got, tc.want)
		}
	}
}
