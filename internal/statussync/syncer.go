package statussync

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/apiutil"
)

// Options wire a Syncer.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	// Pods is the API server's view of this node's pods (the pod source's
	// informer).
	Pods corelisters.PodLister
	// Statuses are berth's pods with their statuses; Changed signals
	// after they change.
	Statuses func() []v1.Pod
	Changed  <-chan struct{}
	// Static is the static pods berth wants, and whether its sources have
	// been read.
	Static func() ([]*v1.Pod, bool)
	// Stopped reports a pod berth runs nothing of.
	Stopped func(types.UID) bool
	// Forget drops berth's final status of a pod the API server no longer
	// has (status.Manager.Delete).
	Forget func(types.UID)
	Clock  clock.WithTicker
	Log    *slog.Logger
}

// Syncer carries out the plans.
type Syncer struct {
	o       Options
	trigger chan struct{}
	// Owned by Run.
	sent    map[types.UID]v1.PodStatus
	nodeUID types.UID
}

// resyncPeriod is the kubelet's status manager sync period: what a failed
// call or a missed signal waits for at most.
const resyncPeriod = 10 * time.Second

// callTimeout bounds each API call.
const callTimeout = 10 * time.Second

// New returns a Syncer.
func New(o Options) *Syncer {
	return &Syncer{o: o, trigger: make(chan struct{}, 1), sent: map[types.UID]v1.PodStatus{}}
}

// Trigger asks for a pass soon (the API server's pods changed).
func (s *Syncer) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Run makes a pass after every change and every resync period until ctx
// is done.
func (s *Syncer) Run(ctx context.Context) {
	t := s.o.Clock.NewTicker(resyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.o.Changed:
		case <-s.trigger:
		case <-t.C():
		}
		s.pass(ctx)
	}
}

func (s *Syncer) pass(ctx context.Context) {
	if s.nodeUID == "" {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		node, err := s.o.Client.CoreV1().Nodes().Get(cctx, s.o.NodeName, metav1.GetOptions{ResourceVersion: "0"})
		cancel()
		if err == nil {
			s.nodeUID = node.UID
		}
	}
	api, err := s.o.Pods.List(labels.Everything())
	if err != nil {
		s.o.Log.Warn("listing the node's pods failed", "err", err)
		return
	}
	static, known := s.o.Static()
	in := Inputs{NodeName: s.o.NodeName, NodeUID: s.nodeUID, Berth: s.o.Statuses(), Static: static,
		StaticKnown: known, API: api, Stopped: s.o.Stopped, Sent: s.sent}
	if s.nodeUID == "" {
		in.Static = nil // no mirror pod without its owner
	}
	plan := Decide(in)
	for _, pt := range plan.Patches {
		s.patch(ctx, pt)
	}
	for _, m := range plan.DeleteMirrors {
		s.deletePod(ctx, m, "mirror pod no longer matches its static pod")
	}
	for _, m := range plan.CreateMirrors {
		s.createMirror(ctx, m)
	}
	for _, p := range plan.Delete {
		s.deletePod(ctx, p, "pod deleted and stopped")
	}
	for _, uid := range plan.Forget {
		s.o.Forget(uid)
	}
	// Forget what was sent for pods the API server no longer has.
	live := map[types.UID]bool{}
	for _, p := range api {
		live[p.UID] = true
	}
	for uid := range s.sent {
		if !live[uid] {
			delete(s.sent, uid)
		}
	}
}

// patch posts pt's status as a patch from the API server's pod read
// fresh (the kubelet's status manager reads it too before each patch).
// A patch from the informer's copy loses what that copy has not caught up
// with: a condition posted a moment ago (PodResizeInProgress) and removed
// now is in neither the old copy nor the new status, so the patch would
// not delete it, and the pass after it took the status as sent.
func (s *Syncer) patch(ctx context.Context, pt Patch) {
	name := pt.Pod.Namespace + "/" + pt.Pod.Name
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	pods := s.o.Client.CoreV1().Pods(pt.Pod.Namespace)
	cur, err := pods.Get(ctx, pt.Pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != pt.Pod.UID) {
		return // gone, or a namesake: nothing of this pod to post to
	}
	if err != nil {
		s.o.Log.Warn("reading a pod before updating its status failed", "pod", name, "err", explain(err, "get", "pods"))
		return
	}
	next := Merge(cur.Status, pt.Berth)
	if apiequality.Semantic.DeepEqual(next, cur.Status) {
		s.sent[pt.Pod.UID] = next
		return
	}
	body, err := statusPatch(pt.Pod.UID, cur.Status, next)
	if err != nil {
		s.o.Log.Error("building a pod status patch failed", "pod", name, "err", err)
		return
	}
	_, err = pods.Patch(ctx, pt.Pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		s.o.Log.Warn("updating a pod's status failed", "pod", name, "err", explain(err, "patch", "pods/status"))
		return
	}
	s.sent[pt.Pod.UID] = next
}

func (s *Syncer) createMirror(ctx context.Context, m *v1.Pod) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := s.o.Client.CoreV1().Pods(m.Namespace).Create(ctx, m, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		s.o.Log.Warn("creating a mirror pod failed", "pod", m.Namespace+"/"+m.Name, "err", explain(err, "create", "pods"))
		return
	}
	s.o.Log.Info("mirror pod created", "pod", m.Namespace+"/"+m.Name)
}

// deletePod deletes at once, only the very pod planned on (UID
// precondition): never a namesake created meanwhile.
func (s *Syncer) deletePod(ctx context.Context, p *v1.Pod, why string) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	zero := int64(0)
	uid := p.UID
	err := s.o.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		s.o.Log.Warn("deleting a pod failed", "pod", p.Namespace+"/"+p.Name, "why", why, "err", explain(err, "delete", "pods"))
		return
	}
	s.o.Log.Info("pod deleted from the API server", "pod", p.Namespace+"/"+p.Name, "why", why)
}

// statusPatch is the UID-guarded strategic merge patch from old to new.
func statusPatch(uid types.UID, old, new v1.PodStatus) ([]byte, error) {
	return apiutil.StatusPatch(v1.Pod{Status: old}, v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: new}, v1.Pod{})
}

func explain(err error, verb, resource string) error { return apiutil.Explain(err, verb, resource) }
