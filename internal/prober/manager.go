// Package prober is berth's probe manager: the kubelet's prober manager,
// workers and results managers (pkg/kubelet/prober), built for thousands of
// probes. Every liveness, readiness and startup probe of a pod's containers
// (and of its sidecar init containers) gets a worker; the workers are plain
// state (state.go) driven by one timer heap (scheduler.go) and a pool of
// probe goroutines (pool.go); results are cached by container ID, published
// on Updates, and readiness and startup results survive a berth restart in a
// state file (persist.go).
//
// Container IDs are bare runtime IDs throughout: the part of a published
// containerStatuses[].containerID after "://". The query methods also accept
// the published form.
package prober

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Manager runs the probes of every pod added to it and caches their results.
type Manager struct {
	runner    ProbeRunner
	statuses  StatusSource
	recorder  EventRecorder
	clk       clock.WithTicker
	log       *slog.Logger
	metrics   *metrics
	statePath string    // "" keeps no state
	start     time.Time // containers started before this joined berth already running

	sched   *scheduler
	updates *updateQueue
	dirty   chan struct{} // a persisted result changed

	mu      sync.RWMutex
	pods    map[types.UID]*podProbes
	results map[resultKey]cachedResult
	gen     uint64 // counts changes of persisted results

	saveMu sync.Mutex // one save at a time
	saved  uint64     // gen of the last save; guarded by saveMu

	// onProbeStart, when set (benchmarks), learns how late each probe
	// started against its due time.
	onProbeStart func(late time.Duration)
}

// podProbes is the manager's view of one pod.
type podProbes struct {
	pod         *v1.Pod // the latest given to AddPod; read-only
	terminating bool
	workers     map[workerKey]*worker
}

// NewManager returns a manager that probes with runner, reads container IDs
// and states from statuses, and records probe failures with recorder. Its
// metrics are registered on reg (nil: not registered); a nil recorder
// records nothing, a nil log logs to slog.Default. statePath is where
// readiness and startup results are kept across restarts ("" keeps none);
// its directory is created if missing.
func NewManager(runner ProbeRunner, statuses StatusSource, recorder EventRecorder, clk clock.WithTicker, reg prometheus.Registerer, statePath string, log *slog.Logger) (*Manager, error) {
	if log == nil {
		log = slog.Default()
	}
	if recorder == nil {
		recorder = noEvents{}
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	results := map[resultKey]cachedResult{}
	if statePath != "" {
		if results, err = loadState(statePath, clk.Now(), recorder, log); err != nil {
			return nil, err
		}
	}
	return &Manager{
		runner:    runner,
		statuses:  statuses,
		recorder:  recorder,
		clk:       clk,
		log:       log,
		metrics:   met,
		statePath: statePath,
		start:     clk.Now(),
		sched:     newScheduler(clk),
		updates:   newUpdateQueue(),
		dirty:     make(chan struct{}, 1),
		pods:      map[types.UID]*podProbes{},
		results:   results,
	}, nil
}

// maxIdleRunners bounds the probe goroutines kept parked between attempts:
// enough to absorb bursts without growing new stacks, few enough to cost
// nothing worth mentioning (a parked goroutine is a few KiB).
const maxIdleRunners = 64

// Run probes until ctx is done, then waits for the attempts in flight and
// saves the state file one last time. Pods may be added before Run.
func (m *Manager) Run(ctx context.Context) {
	p := newPool(maxIdleRunners, func(w *worker, due time.Time) { m.attempt(ctx, w, due) })
	var wg sync.WaitGroup
	wg.Go(func() { m.updates.pump(ctx) })
	wg.Go(func() { m.persist(ctx) })
	m.sched.run(ctx, p.submit)
	p.stop()
	wg.Wait()
	if err := m.flush(); err != nil {
		m.log.Error("cannot save probe state", "path", m.statePath, "err", err)
	}
}

// AddPod starts the probes of the pod's containers and sidecar init
// containers. It is idempotent and cheap, and meant to be called on every
// sync of the pod: it also takes the pod's latest metadata (a deletion
// timestamp) and wakes workers waiting for their container, so a new
// container's first probe is not late.
func (m *Manager) AddPod(pod *v1.Pod) {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[pod.UID]
	if e == nil {
		e = &podProbes{workers: map[workerKey]*worker{}}
		m.pods[pod.UID] = e
	}
	e.pod = pod
	if pod.DeletionTimestamp != nil {
		e.terminating = true
	}
	for _, c := range probedContainers(pod) {
		for _, t := range [...]ProbeType{Startup, Readiness, Liveness} {
			if probeOf(c, t) == nil || (e.terminating && t != Readiness) {
				continue
			}
			if w, ok := e.workers[workerKey{c.Name, t}]; ok {
				if w.polling.Load() {
					m.sched.advance(w, now)
				}
				continue
			}
			w := newWorker(pod, c, t)
			w.metrics = m.metrics.acquire(w.labels)
			e.workers[w.key] = w
			m.sched.schedule(w, now)
		}
	}
}

// probedContainers are the pod's regular containers and its sidecars
// (init containers with restartPolicy Always); other init containers run to
// completion and are not probed.
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// StopLivenessAndStartup is for a pod being terminated: its liveness and
// startup probes stop and report Success, so nothing restarts a container
// that is being stopped; readiness probes keep running, but Ready reports
// false for the pod's containers from now on.
func (m *Manager) StopLivenessAndStartup(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[pod.UID]
	if e == nil {
		e = &podProbes{pod: pod, workers: map[workerKey]*worker{}}
		m.pods[pod.UID] = e
	}
	e.terminating = true
	for k, w := range e.workers {
		if k.probeType == Readiness {
			continue
		}
		if w.published != "" {
			m.setLocked(resultKey{k.probeType, w.published}, pod.UID, Success)
		}
		m.retireLocked(w)
	}
}

// RemovePod stops every probe of the pod and drops all its results, those
// restored from the state file included.
func (m *Manager) RemovePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetPodLocked(pod.UID)
	for k, c := range m.results {
		if c.podUID == pod.UID {
			m.dropLocked(k)
		}
	}
}

// CleanupPods removes (as RemovePod) every pod not in desired, including
// pods known only from results restored from the state file.
func (m *Manager) CleanupPods(desired map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.pods {
		if !desired[uid] {
			m.forgetPodLocked(uid)
		}
	}
	for k, c := range m.results {
		if !desired[c.podUID] {
			m.dropLocked(k)
		}
	}
}

// forgetPodLocked stops the pod's workers and forgets the pod.
func (m *Manager) forgetPodLocked(uid types.UID) {
	if e := m.pods[uid]; e != nil {
		for _, w := range e.workers {
			m.retireLocked(w)
		}
		delete(m.pods, uid)
	}
}

// retireLocked stops w for good: it leaves the pod, the queue and the
// metrics. Its cached result stays until the pod is removed or the
// container replaced.
func (m *Manager) retireLocked(w *worker) {
	w.stopped = true
	if e := m.pods[w.podUID]; e != nil && e.workers[w.key] == w {
		delete(e.workers, w.key)
	}
	m.metrics.release(w.labels)
	m.sched.remove(w)
}

// wakeGatedLocked runs the liveness and readiness probes that waited for
// the startup probe w, now that it succeeded.
func (m *Manager) wakeGatedLocked(w *worker, now time.Time) {
	e := m.pods[w.podUID]
	for _, t := range [...]ProbeType{Readiness, Liveness} {
		if g := e.workers[workerKey{w.key.container, t}]; g != nil {
			m.sched.advance(g, now)
		}
	}
}

type noEvents struct{}

func (noEvents) Event(*v1.Pod, string, string, string) {}
