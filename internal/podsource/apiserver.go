package podsource

import (
	"cmp"
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/internal/v1helper"
)

// APIServer is the pods the API server binds to this node, read from a pod
// informer that watches spec.nodeName=<node> (the kubelet's apiserver
// source). Mirror pods are berth's own reflection of its static pods and
// are never run.
type APIServer struct {
	informer cache.SharedIndexInformer
	lister   corelisters.PodLister
	changed  chan struct{}
	// onChange, when set, is also told of every change.
	onChange func()
}

// OnChange calls f (which must not block) after every change of the
// informer's pods. Call it before Run.
func (s *APIServer) OnChange(f func()) { s.onChange = f }

// NewAPIServer reads pods from informer, which must list only this node's
// pods. Register it before the informer starts.
func NewAPIServer(informer cache.SharedIndexInformer) (*APIServer, error) {
	s := &APIServer{
		informer: informer,
		lister:   corelisters.NewPodLister(informer.GetIndexer()),
		changed:  make(chan struct{}, 1),
	}
	notify := func() {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Run sends a snapshot once the informer has synced and after every change,
// keeping only the newest undelivered one. It returns when ctx is done.
func (s *APIServer) Run(ctx context.Context, out chan<- Snapshot) {
	if !cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		return
	}
	last, pending := s.snapshot(), true
	for {
		var send chan<- Snapshot
		if pending {
			send = out
		}
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
			// berth's own status patches come back as changes: only a
			// different snapshot is sent.
			if next := s.snapshot(); !next.Equal(last) {
				last, pending = next, true
			}
			if s.onChange != nil {
				s.onChange()
			}
		case send <- last:
			pending = false
		}
	}
}

// snapshot is the informer's pods that berth should run: every pod bound to
// the node but mirror pods, copied, sorted by namespace/name.
func (s *APIServer) snapshot() Snapshot {
	pods, _ := s.lister.List(labels.Everything())
	var out Snapshot
	for _, p := range pods {
		if v1helper.IsMirrorPod(p) {
			continue
		}
		c := p.DeepCopy()
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[ConfigSourceAnnotationKey] = v1helper.ApiserverSource
		out.Pods = append(out.Pods, c)
	}
	slices.SortFunc(out.Pods, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Lister reads the informer's pods, mirror pods included.
func (s *APIServer) Lister() corelisters.PodLister { return s.lister }
