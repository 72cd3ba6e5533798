package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/cm/hierarchy"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/prober"
	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/userns"
	"github.com/berth-dev/berth/internal/v1helper"
	"github.com/berth-dev/berth/internal/volume"
)

// syncLoop is the single owner of the desired pod set: it applies manifest
// snapshots and PLEG events to the pod workers, admits new pods (and
// carries out their preemptions), kills the runtime's pods no source wants,
// and housekeeps what gone pods left. It publishes its state in view; no
// other part of berth reads it otherwise.
//
// Run needs the pod workers, the probe manager and the device manager
// built, and the PLEG seeded (seed); the sources and the PLEG send to
// snapshots and events. Run returns once ctx is done and the preemptions
// it started have ended.
type syncLoop struct {
	log      *slog.Logger
	clk      clock.WithTicker
	workers  loopWorkers
	statuses *status.Manager
	// cgroups is the pod cgroup tree; nil without cgroupsPerQOS.
	cgroups *hierarchy.Hierarchy
	// podDirs holds the pods' directories (<root>/pods/<uid>).
	podDirs *volume.Manager
	// userns releases the user namespace ranges of pods that are gone.
	userns  *userns.Manager
	probes  *prober.Manager
	devices *devicemanager.Manager
	claims  *claimsJanitor // nil without DRA
	// csiVolumes tears down the CSI volumes of pods that are gone; nil
	// standalone.
	csiVolumes *csiJanitor
	// terminal records the evicted pods; housekeeping forgets those whose
	// pods are gone.
	terminal *status.TerminalStore
	events   *events.Recorder
	// node is the node new pods are admitted against.
	node func() *v1.Node
	// changed, when set, is told after each snapshot is applied and after
	// the runtime lost the last of a pod (the API server's status sync:
	// rejections show at once, a deleted pod is deleted for good at once).
	changed func()
	// preemptions counts preemptions by the first resource lacked.
	preemptions *prometheus.CounterVec
	// view is where the loop publishes its state.
	view *podView
	// snapshots and pleg are the loop's inputs: the merged sources' pods
	// and the PLEG's events.
	snapshots <-chan podsource.Snapshot
	pleg      <-chan pleg.Event

	// admitter is owned by run.
	admitter *admitter
	// preempted reports the preemptions carried out by jobs, goroutines
	// owned by run.
	preempted chan preemption
	jobs      sync.WaitGroup

	// Owned by run; published in view after each change.
	mu          sync.RWMutex
	desired     desiredSet
	manifestErr []podsource.ManifestError
	sourceReady bool
	// incomplete is set while a source (the API server) has not reported:
	// no pod is an orphan yet.
	incomplete bool
	// runtime is every pod the last relists saw, by UID.
	runtime map[types.UID]pleg.Event
}

// loopWorkers is what the sync loop (and its preemptions) does with the
// pod workers.
type loopWorkers interface {
	Update(pod *v1.Pod)
	Kill(uid types.UID, name, namespace string)
	Notify(uid types.UID)
	RuntimeChanged(uid types.UID)
	Has(uid types.UID) bool
	Evict(ctx context.Context, uid types.UID, grace int64, st v1.PodStatus) error
}

// loopDeps are what the sync loop is built from.
type loopDeps struct {
	log      *slog.Logger
	clk      clock.WithTicker
	workers  loopWorkers
	statuses *status.Manager
	cgroups  *hierarchy.Hierarchy
	podDirs  *volume.Manager
	userns   *userns.Manager
	probes   *prober.Manager
	devices  *devicemanager.Manager
	// claims unprepares the ResourceClaims of pods that are gone; nil
	// without DRA.
	claims      *claimsJanitor
	csiVolumes  *csiJanitor
	terminal    *status.TerminalStore
	events      *events.Recorder
	node        func() *v1.Node
	admitter    *admitter
	changed     func()
	preemptions *prometheus.CounterVec
	view        *podView
	snapshots   <-chan podsource.Snapshot
	pleg        <-chan pleg.Event
}

func newSyncLoop(d loopDeps) *syncLoop {
	return &syncLoop{
		log: d.log, clk: d.clk, workers: d.workers, statuses: d.statuses, cgroups: d.cgroups,
		podDirs: d.podDirs, userns: d.userns, probes: d.probes, devices: d.devices, claims: d.claims, csiVolumes: d.csiVolumes, terminal: d.terminal, events: d.events,
		node: d.node, changed: d.changed, preemptions: d.preemptions, view: d.view,
		snapshots: d.snapshots, pleg: d.pleg,
		admitter:  d.admitter,
		preempted: make(chan preemption),
		desired:   desiredSet{},
		runtime:   map[types.UID]pleg.Event{},
	}
}

// seed records what the runtime already runs, from the PLEG's first
// relist: it was admitted before berth restarted, and the loop must know
// it before it admits anything. Before Run.
func (l *syncLoop) seed(initial []pleg.Event) {
	for _, ev := range initial {
		l.runtime[ev.UID] = ev
	}
	l.publish()
}

// publish puts the loop's state in the view. Called by the loop's
// goroutine after each change.
func (l *syncLoop) publish() {
	s := &podSnapshot{
		desired:     make(map[string]podEntry, len(l.desired)),
		admission:   map[string]admission.Result{},
		manifestErr: l.manifestErr,
		sourceReady: l.sourceReady,
		incomplete:  l.incomplete,
	}
	for k, e := range l.desired {
		s.desired[k] = *e
		if r, ok := l.admitter.result(e.pod.UID); ok {
			s.admission[k] = r
		}
	}
	s.runtime = l.runtimeSet()
	l.view.snap.Store(s)
}

// publishRuntime publishes a change of the runtime's pods alone.
func (l *syncLoop) publishRuntime() {
	s := *l.view.load()
	s.runtime = l.runtimeSet()
	l.view.snap.Store(&s)
}

func (l *syncLoop) runtimeSet() map[types.UID]bool {
	out := make(map[types.UID]bool, len(l.runtime))
	for uid := range l.runtime {
		out[uid] = true
	}
	return out
}

// housekeepingPeriod is how often the loop removes what pods left behind
// (their cgroups), as the kubelet's housekeeping does every few seconds.
const housekeepingPeriod = 30 * time.Second

// Run is the loop: see syncLoop.
func (l *syncLoop) Run(ctx context.Context) {
	housekeeping := l.clk.NewTicker(housekeepingPeriod)
	defer housekeeping.Stop()
	defer l.jobs.Wait()
	for {
		l.view.heartbeat.Store(l.clk.Now().UnixNano())
		select {
		case <-ctx.Done():
			return
		case snap := <-l.snapshots:
			first := !l.sourceReady
			l.applySnapshot(ctx, snap)
			if first {
				l.housekeep(ctx)
			}
		case ev := <-l.pleg:
			l.applyEvent(ev)
		case u := <-l.probes.Updates():
			// A probe result changed: the pod's status changes, and a failed
			// liveness or startup probe means a restart.
			l.workers.Notify(u.PodUID)
		case job := <-l.preempted:
			l.finishPreemption(job)
			l.publish()
		case <-housekeeping.C():
			l.housekeep(ctx)
		}
	}
}

// syncLoopStallThreshold is how long the loop may go without coming back
// to wait before it counts as stuck: it wakes at least every housekeeping
// period, and no iteration should take more than a little of one.
const syncLoopStallThreshold = 3 * housekeepingPeriod

// syncLoopHealth judges the loop's last heartbeat (Unix nanoseconds, 0 for
// none yet).
func syncLoopHealth(heartbeat int64, now time.Time, threshold time.Duration) error {
	if heartbeat == 0 {
		return errors.New("the sync loop has not started")
	}
	if since := now.Sub(time.Unix(0, heartbeat)); since > threshold {
		return fmt.Errorf("the sync loop has not turned for %s (threshold %s)", since.Round(time.Second), threshold)
	}
	return nil
}

// housekeep frees the devices of pods that are gone or terminal and removes
// the cgroups and directories of pods that are neither wanted, nor being
// killed, nor in the runtime any more.
func (l *syncLoop) housekeep(ctx context.Context) {
	if !l.sourceReady {
		return
	}
	if l.devices != nil {
		l.devices.UpdateAllocatedDevices()
	}
	l.mu.Lock()
	l.admitter.prune(l.desired, l.workers.Has)
	l.mu.Unlock()
	if l.terminal != nil {
		gone, err := l.terminal.Prune(l.known)
		for _, uid := range gone {
			l.log.Info("forgot the eviction of a pod that is gone", "uid", uid)
		}
		if err != nil {
			l.log.Warn("forgetting evicted pods that are gone", "err", err)
		}
	}
	wanted := map[types.UID]bool{}
	for _, e := range l.desired {
		if e.runs() {
			wanted[e.pod.UID] = true
		}
	}
	keep := func(uid types.UID) bool {
		_, inRuntime := l.runtime[uid]
		return wanted[uid] || inRuntime || l.workers.Has(uid)
	}
	if l.cgroups != nil {
		removed, err := l.cgroups.Housekeep(keep)
		for _, uid := range removed {
			l.log.Info("removed the cgroup of a pod that is gone", "uid", uid)
		}
		if err != nil {
			l.log.Warn("removing cgroups of pods that are gone", "err", err)
		}
	}
	if l.podDirs != nil {
		removed, err := l.podDirs.Housekeep(keep)
		for _, uid := range removed {
			l.log.Info("removed the directory of a pod that is gone", "uid", uid)
		}
		if err != nil {
			l.log.Warn("removing directories of pods that are gone", "err", err)
		}
	}
	if l.userns != nil {
		for _, uid := range l.userns.Housekeep(keep) {
			l.log.Info("released the user namespace of a pod that is gone", "uid", uid)
		}
	}
	// Not before the API server's pods are known: until then a running
	// pod may look gone. A pod that finished (Succeeded, Failed) holds its
	// claims no more, as the kubelet unprepares them once a pod is
	// terminal: the scheduler may give the devices to another pod.
	if l.claims != nil && !l.incomplete {
		l.claims.collect(ctx, &l.jobs, func(uid types.UID) bool { return keep(uid) && !l.isTerminal(uid) })
	}
	if l.csiVolumes != nil && !l.incomplete {
		l.csiVolumes.collect(ctx, &l.jobs, keep)
	}
}

// applySnapshot moves the desired set to the new snapshot: new UIDs are
// admitted and start (or preempt others first, or are rejected), vanished
// UIDs are killed, and an edited manifest (same name, new UID) is both.
func (l *syncLoop) applySnapshot(ctx context.Context, snap podsource.Snapshot) {
	l.mu.Lock()
	prev := l.desired
	next := desiredFrom(snap, prev)
	// Pods that finished stopping since the last pass no longer count.
	l.admitter.prune(prev, l.workers.Has)
	jobs := l.admitter.admit(next, prev, admitEnv{node: l.node(), terminal: l.isTerminal, adopted: l.adopted})
	l.desired, l.manifestErr, l.sourceReady, l.incomplete = next, snap.Errors, true, snap.Incomplete
	l.mu.Unlock()
	l.publish()

	if l.cgroups != nil {
		var running []*v1.Pod
		for _, e := range next {
			if e.runs() {
				running = append(running, e.pod)
			}
		}
		if err := l.cgroups.SetPods(running); err != nil {
			l.log.Warn("updating the QoS cgroups failed", "err", err)
		}
	}
	wanted := map[types.UID]bool{}
	for _, e := range next {
		if e.runs() {
			wanted[e.pod.UID] = true
		}
	}
	l.probes.CleanupPods(wanted)
	l.admitter.publish(next, prev)
	c := diff(prev, next)
	if snap.Incomplete {
		// A pod missing now may be one the silent source still wants; the
		// manifest directory has spoken, so its pods go as usual.
		c.kill = slices.DeleteFunc(c.kill, func(p *v1.Pod) bool {
			return p.DeletionTimestamp == nil && !v1helper.IsStaticPod(p)
		})
	}
	for _, pod := range c.update {
		l.workers.Update(pod)
	}
	for _, pod := range c.kill {
		if pod.DeletionTimestamp != nil {
			l.log.Info("pod deleted in the API server; killing it", "pod", key(pod), "uid", pod.UID,
				"gracePeriod", ptr.Deref(pod.DeletionGracePeriodSeconds, -1))
			// The worker's pod carries the deletion grace period.
			l.workers.Update(pod)
		} else {
			l.log.Info("pod no longer wanted; killing it", "pod", key(pod), "uid", pod.UID)
		}
		l.workers.Kill(pod.UID, pod.Name, pod.Namespace)
	}
	// Orphans get their workers before new pods do: a new pod that
	// replaces one found in the runtime (its manifest edited while berth
	// was down) waits for it to stop (podworker's predecessor).
	l.killOrphans()
	for _, pod := range c.start {
		l.log.Info("pod added", "pod", key(pod), "uid", pod.UID)
		l.workers.Update(pod)
	}
	// After the starts: a victim admitted in this same pass has its worker
	// by now, and is stopped through it like any other.
	for _, job := range jobs {
		l.startPreemption(ctx, job)
	}
	if l.changed != nil {
		l.changed()
	}
}

// isTerminal reports a pod that stopped for good: it holds nothing. Right
// after a restart of berth, before the evicted pods' workers show them
// again, the record of stopped pods says so.
func (l *syncLoop) isTerminal(uid types.UID) bool {
	if terminal(l.statuses, uid) {
		return true
	}
	if l.terminal != nil {
		_, stopped := l.terminal.Get(uid)
		return stopped
	}
	return false
}

// adopted reports a pod berth found when it started, running or recorded
// as stopped for good: it was admitted before berth restarted.
func (l *syncLoop) adopted(uid types.UID) bool {
	if _, ok := l.runtime[uid]; ok {
		return true
	}
	if l.terminal != nil {
		if _, ok := l.terminal.Get(uid); ok {
			return true
		}
	}
	return false
}

// applyEvent wakes the pod's worker, or kills the pod when berth no longer
// wants it (a manifest deleted while berth was down).
func (l *syncLoop) applyEvent(ev pleg.Event) {
	l.mu.Lock()
	if ev.Gone {
		delete(l.runtime, ev.UID)
	} else {
		l.runtime[ev.UID] = ev
	}
	l.mu.Unlock()
	l.publishRuntime()
	if ev.Gone && l.changed != nil {
		l.changed()
	}
	if l.workers.Has(ev.UID) {
		l.workers.RuntimeChanged(ev.UID)
		return
	}
	if !ev.Gone {
		l.killOrphans()
	}
}

// killOrphans kills every pod the runtime has that no manifest wants. It
// waits for the first manifest snapshot: before it, every pod looks orphaned.
func (l *syncLoop) killOrphans() {
	if !l.sourceReady || l.incomplete {
		return
	}
	uids := make([]types.UID, 0, len(l.runtime))
	for uid := range l.runtime {
		uids = append(uids, uid)
	}
	for _, uid := range orphans(l.desired, uids, l.workers.Has) {
		ev := l.runtime[uid]
		l.log.Info("pod in the runtime has no manifest; killing it", "pod", ev.Namespace+"/"+ev.Name, "uid", uid)
		l.workers.Kill(uid, ev.Name, ev.Namespace)
	}
}

// orphans returns the runtime's pods that are neither desired nor already
// in a worker's hands, sorted.
func orphans(desired desiredSet, inRuntime []types.UID, hasWorker func(types.UID) bool) []types.UID {
	wanted := map[types.UID]bool{}
	for _, e := range desired {
		if e.runs() {
			wanted[e.pod.UID] = true
		}
	}
	var out []types.UID
	for _, uid := range inRuntime {
		if !wanted[uid] && !hasWorker(uid) {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out
}

// manifestErrorPod shows a broken manifest as a Failed pod, so `berth pods`
// and the API report it where users look for their pods.
// source is where the pod came from: the manifest directory, or the store
// of `berth apply`.
func manifestErrorPod(me podsource.ManifestError, source string) v1.Pod {
	p := v1.Pod{}
	p.APIVersion, p.Kind = "v1", "Pod"
	p.Name, p.Namespace = me.Name, me.Namespace
	p.Annotations = map[string]string{
		podsource.ConfigSourceAnnotationKey: source,
		"berth.dev/manifest-path":           me.Path,
	}
	p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "InvalidManifest", Message: me.Error()}
	return p
}

func key(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// known reports whether berth wants the pod with uid or still holds it (a
// worker is running or killing it).
func (l *syncLoop) known(uid types.UID) bool {
	if l.workers.Has(uid) {
		return true
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, e := range l.desired {
		if e.pod.UID == uid && e.runs() {
			return true
		}
	}
	return false
}

func sortPods(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return key(pods[i]) < key(pods[j]) })
}
