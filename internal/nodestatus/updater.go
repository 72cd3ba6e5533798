package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/apiutil"
)

// Updater registers the Node and keeps its status current.
type Updater struct {
	client  kubernetes.Interface
	id      Identity
	observe func() Observed
	clock   clock.WithTicker
	log     *slog.Logger
	// update is how often the status is computed, report how often an
	// unchanged one is posted anyway.
	update, report time.Duration
	register       bool
	// timeout bounds each API call.
	timeout time.Duration

	// Owned by Run.
	lastPosted time.Time
	// seenReady is set once the node was found ready: the fast checks of
	// start-up are over.
	seenReady bool
	// taints are the Node's as last read, for admission.
	taints atomic.Pointer[[]v1.Taint]
}

// Taints returns the Node's taints as last read from the API server, or
// the ones it registers with before any read.
func (u *Updater) Taints() []v1.Taint {
	if t := u.taints.Load(); t != nil {
		return *t
	}
	return u.id.Taints
}

// Options configure an Updater.
type Options struct {
	Client  kubernetes.Interface
	ID      Identity
	Observe func() Observed
	Clock   clock.WithTicker
	Log     *slog.Logger
	// UpdateEvery and ReportEvery are nodeStatusUpdateFrequency and
	// nodeStatusReportFrequency.
	UpdateEvery, ReportEvery time.Duration
	// Register creates the Node when it does not exist (registerNode).
	Register bool
}

// NewUpdater returns an Updater; nothing is sent before Run.
func NewUpdater(o Options) *Updater {
	return &Updater{client: o.Client, id: o.ID, observe: o.Observe, clock: o.Clock, log: o.Log,
		update: o.UpdateEvery, report: o.ReportEvery, register: o.Register, timeout: 10 * time.Second}
}

// The kubelet's fastStatusUpdateOnce: after start-up, readiness is checked
// every fastStatusPoll, locally, for at most nodeReadyGracePeriod, so that
// the node turns Ready as soon as it is (the runtime up, the network
// configured) instead of at the next update period.
const (
	fastStatusPoll       = 100 * time.Millisecond
	nodeReadyGracePeriod = 120 * time.Second
)

// Run registers the node, retrying with back-off while the API server is
// away, then posts its status every update period when it changed or is
// due, and at once when the node first becomes ready. It returns when ctx
// is done.
func (u *Updater) Run(ctx context.Context) {
	if !u.registerWithRetry(ctx) {
		return
	}
	t := u.clock.NewTicker(u.update)
	defer t.Stop()
	fastUntil := u.clock.Now().Add(nodeReadyGracePeriod)
	for {
		if err := u.sync(ctx); err != nil && ctx.Err() == nil {
			u.log.Warn("updating the node's status failed; retrying", "err", err)
		}
		if !u.wait(ctx, t, fastUntil) {
			return
		}
	}
}

// wait returns true at the next update period, or sooner when the node,
// never ready so far, has become ready within fastUntil; false when ctx
// is done. The fast checks read only berth's own state: no API request.
func (u *Updater) wait(ctx context.Context, t clock.Ticker, fastUntil time.Time) bool {
	for {
		var poll <-chan time.Time
		if !u.seenReady && u.clock.Now().Before(fastUntil) {
			poll = u.clock.After(fastStatusPoll)
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case <-poll:
			if u.observe().NotReady == "" {
				u.seenReady = true
				return true
			}
		}
	}
}

// registerWithRetry is the kubelet's registerWithAPIServer: back-off from
// 100 ms doubling to 7 s until the Node exists.
func (u *Updater) registerWithRetry(ctx context.Context) bool {
	delay := 100 * time.Millisecond
	for {
		err := u.registerOnce(ctx)
		if err == nil {
			return true
		}
		u.log.Warn("registering the node failed; retrying", "node", u.id.Name, "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-u.clock.After(delay):
		}
		delay = min(2*delay, 7*time.Second)
	}
}

func (u *Updater) registerOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	nodes := u.client.CoreV1().Nodes()
	if u.register {
		node := Initial(u.id, u.observe(), u.clock.Now())
		_, err := nodes.Create(ctx, node, metav1.CreateOptions{})
		if err == nil {
			u.log.Info("node registered", "node", u.id.Name)
			u.lastPosted = u.clock.Now()
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", u.id.Name, explain(err, "create", "nodes"))
		}
	}
	existing, err := nodes.Get(ctx, u.id.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", u.id.Name, explain(err, "get", "nodes"))
	}
	labels, changed := Reconcile(existing, u.id)
	if !changed {
		u.log.Info("node already registered", "node", u.id.Name)
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := nodes.Patch(ctx, u.id.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch node %s labels: %w", u.id.Name, explain(err, "patch", "nodes"))
	}
	u.log.Info("node already registered; labels reconciled", "node", u.id.Name)
	return nil
}

// sync posts the status when it changed or is due.
func (u *Updater) sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	nodes := u.client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, u.id.Name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) && u.register {
		// Deleted behind berth's back (or a new control plane): register
		// again, as the kubelet does.
		u.log.Warn("the node is gone from the API server; registering it again", "node", u.id.Name)
		return u.registerOnce(ctx)
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", u.id.Name, explain(err, "get", "nodes"))
	}
	taints := slices.Clone(node.Spec.Taints)
	u.taints.Store(&taints)
	now := u.clock.Now()
	obs := u.observe()
	u.seenReady = u.seenReady || obs.NotReady == ""
	next := Status(u.id, obs, node.Status, now)
	if !Due(Changed(node.Status, next), u.lastPosted, now, u.report) {
		return nil
	}
	patch, err := statusPatch(node.UID, node.Status, next)
	if err != nil {
		return err
	}
	if _, err := nodes.Patch(ctx, u.id.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch node %s status: %w", u.id.Name, explain(err, "patch", "nodes/status"))
	}
	u.lastPosted = now
	return nil
}

// statusPatch is the UID-guarded strategic merge patch from old to new.
func statusPatch(uid types.UID, old, new v1.NodeStatus) ([]byte, error) {
	return apiutil.StatusPatch(v1.Node{Status: old}, v1.Node{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: new}, v1.Node{})
}

func explain(err error, verb, resource string) error { return apiutil.Explain(err, verb, resource) }
