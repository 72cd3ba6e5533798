package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"
)

// Task event topics, as containerd publishes them.
const (
	TopicTaskCreate  = runtime.TaskCreateEventTopic
	TopicTaskStart   = runtime.TaskStartEventTopic
	TopicTaskOOM     = runtime.TaskOOMEventTopic
	TopicTaskExit    = runtime.TaskExitEventTopic
	TopicTaskDelete  = runtime.TaskDeleteEventTopic
	TopicTaskPaused  = runtime.TaskPausedEventTopic
	TopicTaskResumed = runtime.TaskResumedEventTopic
)

// TaskEvent is a change of a container's (or a sandbox's) task. CRI uses
// the same IDs for containers and sandboxes as containerd does.
type TaskEvent struct {
	Topic       string
	ContainerID string
	// ExitCode is set for TopicTaskExit and TopicTaskDelete.
	ExitCode uint32
	// At is when the process exited for exits and deletes, else when
	// containerd published the event.
	At time.Time
}

const (
	// Re-subscription back-off after the stream breaks: containerd
	// restarting takes about a second.
	watchMinBackoff = 100 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
)

// WatchTasks follows containerd's task events (/tasks/*) in the CRI
// namespace and calls onEvent for each, in order, from a single goroutine.
// Events of exec'd processes (probes, `berth exec`) are left out: they do
// not change a container's state. When the stream breaks (containerd
// restarts) it subscribes again with back-off; events published in between
// are lost, so the caller must relist after a gap. It returns nil when ctx
// is done.
func WatchTasks(ctx context.Context, address string, log *slog.Logger, onEvent func(TaskEvent)) error {
	c, err := newClient(address)
	if err != nil {
		return err
	}
	defer c.Close()
	if log == nil {
		log = slog.Default()
	}
	return watchTasks(ctx, c.EventService(), clock.RealClock{}, log, onEvent)
}

func watchTasks(ctx context.Context, sub events.Subscriber, clk clock.Clock, log *slog.Logger, onEvent func(TaskEvent)) error {
	backoff := watchMinBackoff
	for {
		delivered, err := followStream(ctx, sub, log, onEvent)
		if ctx.Err() != nil {
			return nil
		}
		if delivered {
			// The stream worked for a while: this is a new outage.
			backoff = watchMinBackoff
		}
		log.Warn("containerd task event stream broke; subscribing again", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(backoff):
		}
		backoff = min(2*backoff, watchMaxBackoff)
	}
}

// followStream subscribes once and delivers events until the stream ends.
// It reports whether any event came through.
func followStream(ctx context.Context, sub events.Subscriber, log *slog.Logger, onEvent func(TaskEvent)) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the subscription's goroutine in the client
	ch, errs := sub.Subscribe(ctx, taskFilters()...)
	delivered := false
	for {
		select {
		case <-ctx.Done():
			return delivered, ctx.Err()
		case env, ok := <-ch:
			if !ok {
				return delivered, errors.New("event channel closed")
			}
			delivered = true
			ev, ok, err := toTaskEvent(env)
			if err != nil {
				log.Warn("undecodable containerd event", "topic", env.Topic, "err", err)
				continue
			}
			if ok {
				onEvent(ev)
			}
		case err, ok := <-errs:
			if !ok {
				return delivered, errors.New("event stream closed")
			}
			return delivered, err
		}
	}
}

// followedTopics are the task events berth acts on: those that tell of a
// change berth did not make, a task's exit, OOM kill or deletion. A task's
// creation and start are a pod worker's own steps, which it reads back
// when it makes them; followed, each asked for a relist of every pod, four
// per pod at start-up, most of the relists then. Nor the exec events: each
// exec probe makes an exec-added and an exec-started (and an exit, told
// apart only by its IDs, so dropped in toTaskEvent), at 100 exec probes a
// second a stream containerd would send for nothing.
var followedTopics = []string{TopicTaskOOM, TopicTaskExit, TopicTaskDelete}

// taskFilters select followedTopics in the CRI namespace, on the server.
// containerd joins the filters of one subscription with OR and the terms
// of one filter with AND: one filter per topic, each with the namespace.
// (A filter for the topics and another for the namespace subscribed to
// every event of the namespace, images and snapshots too, and to every
// namespace's task events.)
func taskFilters() []string {
	ns := `namespace==` + strconv.Quote(criNamespace)
	out := make([]string, 0, len(followedTopics))
	for _, t := range followedTopics {
		out = append(out, `topic==`+strconv.Quote(t)+`,`+ns)
	}
	return out
}

// toTaskEvent turns an envelope into a TaskEvent; ok is false for events
// berth does not follow (exec'd processes, topics it does not know).
func toTaskEvent(env *events.Envelope) (ev TaskEvent, ok bool, err error) {
	if env.Event == nil {
		return TaskEvent{}, false, fmt.Errorf("%s: no payload", env.Topic)
	}
	payload, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		return TaskEvent{}, false, fmt.Errorf("%s: %w", env.Topic, err)
	}
	ev = TaskEvent{Topic: env.Topic, At: env.Timestamp}
	switch e := payload.(type) {
	case *apievents.TaskCreate:
		ev.ContainerID = e.ContainerID
	case *apievents.TaskStart:
		ev.ContainerID = e.ContainerID
	case *apievents.TaskOOM:
		ev.ContainerID = e.ContainerID
	case *apievents.TaskPaused:
		ev.ContainerID = e.ContainerID
	case *apievents.TaskResumed:
		ev.ContainerID = e.ContainerID
	case *apievents.TaskExit:
		if e.ID != "" && e.ID != e.ContainerID {
			return TaskEvent{}, false, nil // an exec'd process
		}
		ev.ContainerID, ev.ExitCode, ev.At = e.ContainerID, e.ExitStatus, exitTime(e.ExitedAt, env.Timestamp)
	case *apievents.TaskDelete:
		if e.ID != "" && e.ID != e.ContainerID {
			return TaskEvent{}, false, nil
		}
		ev.ContainerID, ev.ExitCode, ev.At = e.ContainerID, e.ExitStatus, exitTime(e.ExitedAt, env.Timestamp)
	default:
		return TaskEvent{}, false, nil
	}
	if ev.ContainerID == "" {
		return TaskEvent{}, false, fmt.Errorf("%s: no container ID", env.Topic)
	}
	return ev, true, nil
}

func exitTime(ts *timestamppb.Timestamp, fallback time.Time) time.Time {
	if ts == nil || (ts.Seconds == 0 && ts.Nanos == 0) {
		return fallback
	}
	return ts.AsTime()
}
