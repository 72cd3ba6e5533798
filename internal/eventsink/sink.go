// Package eventsink posts berth's events to the API server, so that
// `kubectl describe` and `kubectl get events` show why berth did what it
// did. The recorder keeps deduplicating with counts; a repeat becomes a
// patch of the event's count and last timestamp, as the kubelet's event
// correlator does. Posting never blocks the recorder: events queue, and
// past the queue's bound they are dropped (and counted in the log).
package eventsink

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/internal/apiutil"
)

// queueSize bounds the events waiting for the API server.
const queueSize = 1000

// callTimeout bounds each post.
const callTimeout = 10 * time.Second

// Sink queues events for the API server.
type Sink struct {
	client kubernetes.Interface
	log    *slog.Logger
	queue  chan v1.Event
}

// New returns a sink that posts with client once Run runs.
func New(client kubernetes.Interface, log *slog.Logger) *Sink {
	return &Sink{client: client, log: log, queue: make(chan v1.Event, queueSize)}
}

// Put queues e, or drops it when the queue is full.
func (s *Sink) Put(e v1.Event) {
	select {
	case s.queue <- e:
	default:
		s.log.Debug("event dropped: the API server is behind", "reason", e.Reason, "object", e.InvolvedObject.Name)
	}
}

// Run posts queued events until ctx is done.
func (s *Sink) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-s.queue:
			s.post(ctx, e)
		}
	}
}

// namespaceOf is where an event lives: its object's namespace, or
// "default" for the node's, as the kubelet posts them.
func namespaceOf(e v1.Event) string {
	if e.InvolvedObject.Namespace != "" {
		return e.InvolvedObject.Namespace
	}
	return metav1.NamespaceDefault
}

func (s *Sink) post(ctx context.Context, e v1.Event) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	e.Namespace = namespaceOf(e)
	e.ResourceVersion, e.UID, e.CreationTimestamp = "", "", metav1.Time{}
	events := s.client.CoreV1().Events(e.Namespace)
	if e.Count > 1 {
		patch, err := json.Marshal(map[string]any{"count": e.Count, "lastTimestamp": e.LastTimestamp, "message": e.Message})
		if err == nil {
			_, err = events.Patch(ctx, e.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		}
		if err == nil {
			return
		}
		if !apierrors.IsNotFound(err) {
			s.log.Warn("posting an event failed", "reason", e.Reason, "object", e.InvolvedObject.Name,
				"err", apiutil.Explain(err, "patch", "events"))
			return
		}
		// The first occurrence never made it: post the event whole.
	}
	if _, err := events.Create(ctx, &e, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		s.log.Warn("posting an event failed", "reason", e.Reason, "object", e.InvolvedObject.Name,
			"err", apiutil.Explain(err, "create", "events"))
	}
}
