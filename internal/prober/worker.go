package prober

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/prober/probe"
	"github.com/berth-dev/berth/internal/restartpolicy"
)

// worker probes one probe of one container. It has no goroutine of its own:
// the scheduler hands it to the pool when it is due, and each attempt
// schedules the next one.
type worker struct {
	podUID    types.UID
	key       workerKey
	container v1.Container // a copy: probe parameters are fixed at AddPod, like the kubelet's
	spec      *v1.Probe
	cfg       probeConfig
	labels    metricLabels
	metrics   workerMetrics

	// Guarded by Manager.mu.
	stopped   bool
	published string // container ID whose result this worker last cached

	// Owned by the attempt in flight; a worker's attempts never overlap.
	state probeState

	// polling: the last attempt waited for a new status; AddPod wakes it.
	polling atomic.Bool

	// Guarded by scheduler.mu.
	due   time.Time
	index int
}

// workerKey identifies a worker within its pod. Container names are unique
// across a pod's init and regular containers.
type workerKey struct {
	container string
	probeType ProbeType
}

// The API server's probe defaults, for pods that reach berth undefaulted.
const (
	defaultPeriod           = 10 * time.Second
	defaultTimeout          = time.Second
	defaultFailureThreshold = 3
)

func newWorker(pod *v1.Pod, c *v1.Container, t ProbeType) *worker {
	w := &worker{
		podUID:    pod.UID,
		key:       workerKey{c.Name, t},
		container: *c,
		index:     -1,
		labels:    metricLabels{t.title(), c.Name, pod.Name, pod.Namespace, string(pod.UID)},
	}
	w.spec = probeOf(&w.container, t)
	w.cfg = configFor(t, w.spec, c.StartupProbe != nil)
	return w
}

func probeOf(c *v1.Container, t ProbeType) *v1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

func configFor(t ProbeType, p *v1.Probe, hasStartup bool) probeConfig {
	cfg := probeConfig{
		probeType:        t,
		successThreshold: int(p.SuccessThreshold),
		failureThreshold: int(p.FailureThreshold),
		initialDelay:     max(0, seconds(p.InitialDelaySeconds)),
		period:           seconds(p.PeriodSeconds),
		gated:            hasStartup && t != Startup,
	}
	if cfg.period <= 0 {
		cfg.period = defaultPeriod
	}
	// Validation allows only 1 for liveness and startup.
	if cfg.successThreshold < 1 || t != Readiness {
		cfg.successThreshold = 1
	}
	if cfg.failureThreshold < 1 {
		cfg.failureThreshold = defaultFailureThreshold
	}
	return cfg
}

func seconds(s int32) time.Duration { return time.Duration(s) * time.Second }

// observe fills the status-derived part of an observation.
func observe(o *observation, status *v1.PodStatus, pod *v1.Pod, c *v1.Container) {
	if status.Phase == v1.PodSucceeded || status.Phase == v1.PodFailed {
		o.podFinished = true
		return
	}
	cs := containerStatus(status, c.Name)
	if cs == nil || cs.ContainerID == "" {
		return
	}
	o.containerID = bareID(cs.ContainerID)
	switch {
	case cs.State.Running != nil:
		o.running = true
		o.startedAt = cs.State.Running.StartedAt.Time
		if o.startedAt.IsZero() {
			// No start time published: count from this manager's start
			// rather than from year one.
			o.startedAt = o.agentStart
		}
	case cs.State.Terminated != nil:
		o.exited = true
		o.restarts = restartsAfterExit(pod, c, cs.State.Terminated.ExitCode)
	}
}

// containerStatus finds a container's status among the regular containers,
// then among the init containers (sidecars), as the kubelet does.
func containerStatus(st *v1.PodStatus, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name && list[i].ContainerID != "" {
				return &list[i]
			}
		}
	}
	return nil
}

// restartsAfterExit reports whether a container that exited with exitCode
// will be started again: its own restart rules and policy (sidecars:
// Always) or else the pod's.
func restartsAfterExit(pod *v1.Pod, c *v1.Container, exitCode int32) bool {
	return restartpolicy.ShouldRestart(&pod.Spec, c, exitCode)
}

// bareID strips the runtime scheme from a published container ID
// ("containerd://abc" -> "abc"). berth keys probe results by the bare ID.
func bareID(id string) string {
	if _, bare, ok := strings.Cut(id, "://"); ok {
		return bare
	}
	return id
}

// maxProbeRetries: an attempt whose handler errors (not a failed probe, a
// probe that could not be run) is retried at once, like the kubelet's.
const maxProbeRetries = 3

// timeoutGrace is added to the probe's own timeout for the context that
// bounds each try: the handler enforces timeoutSeconds, the context only
// guarantees that a stuck handler cannot hold a pool goroutine forever.
const timeoutGrace = time.Second

// attempt runs one attempt of w and schedules the next, or retires w.
func (m *Manager) attempt(ctx context.Context, w *worker, due time.Time) {
	next, keep := m.probeOnce(ctx, w, due)
	if keep {
		m.mu.RLock()
		if !w.stopped {
			m.sched.schedule(w, next)
		}
		m.mu.RUnlock()
		return
	}
	m.mu.Lock()
	if !w.stopped {
		m.retireLocked(w)
	}
	m.mu.Unlock()
}

// probeOnce is doProbe: look, step, maybe probe and record. It returns when
// to try next, or keep=false when the worker is done.
func (m *Manager) probeOnce(ctx context.Context, w *worker, due time.Time) (next time.Time, keep bool) {
	now := m.clk.Now()
	o, pod, podIP, ok := m.look(w, now)
	if !ok {
		return time.Time{}, false
	}
	s, d := step(w.cfg, w.state, o)
	w.state = s
	w.polling.Store(d.poll)
	if d.publish || d.drop != "" {
		m.mu.Lock()
		if !w.stopped {
			if d.drop != "" {
				m.dropLocked(resultKey{w.cfg.probeType, d.drop})
			}
			if d.publish {
				m.publishLocked(w, s.result)
			}
		}
		m.mu.Unlock()
	}
	switch d.verdict {
	case wait:
		return d.at, true
	case stop:
		return time.Time{}, false
	}
	if m.onProbeStart != nil {
		m.onProbeStart(now.Sub(due))
	}
	m.probe(ctx, w, pod, podIP)
	return probeDue(w.cfg, w.state, o), true
}

// look gathers what w sees: the pod's published status, its own pod entry
// and the cached results of the container. ok is false once w is stopped.
func (m *Manager) look(w *worker, now time.Time) (o observation, pod *v1.Pod, podIP string, ok bool) {
	status, known := m.statuses.Get(w.podUID)
	m.mu.RLock()
	defer m.mu.RUnlock()
	if w.stopped {
		return o, nil, "", false
	}
	e := m.pods[w.podUID]
	o = observation{now: now, agentStart: m.start, statusKnown: known, terminating: e.terminating || e.pod.DeletionTimestamp != nil}
	if known {
		observe(&o, &status, e.pod, &w.container)
	}
	if o.containerID != "" {
		c, ok := m.results[resultKey{w.cfg.probeType, o.containerID}]
		o.cached, o.hasCached = c.result, ok
		o.startupDone = m.results[resultKey{Startup, o.containerID}].result == Success
	}
	return o, e.pod, status.PodIP, true
}

// probe runs the probe once and records the outcome: metrics, events, and
// the result once a threshold is met. A probe that could not be run at all
// keeps the previous result.
func (m *Manager) probe(ctx context.Context, w *worker, pod *v1.Pod, podIP string) {
	began := m.clk.Now()
	res, output, err := m.runProbe(ctx, w, pod, w.state.containerID, podIP)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: not the container's fault
		}
		w.metrics.unknown.Inc()
		// The kubelet times an unknown outcome as it does a success.
		w.metrics.duration.Observe(m.clk.Since(began).Seconds())
		m.log.Debug("probe errored", "pod", pod.Namespace+"/"+pod.Name, "container", w.key.container, "probe", w.cfg.probeType, "err", err)
		m.recorder.Event(pod, v1.EventTypeWarning, events.ContainerUnhealthy, fmt.Sprintf("%s probe errored: %v", w.cfg.probeType.title(), err))
		return
	}
	m.account(w, pod, res, output, m.clk.Since(began))

	s, publish := record(w.cfg, w.state, fromProbe(res))
	w.state = s
	if !publish {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !w.stopped && m.publishLocked(w, s.result) && w.cfg.probeType == Startup && s.result == Success {
		m.wakeGatedLocked(w, began)
	}
}

// runProbe runs the handler, retrying an attempt that errors.
func (m *Manager) runProbe(ctx context.Context, w *worker, pod *v1.Pod, containerID, podIP string) (res probe.Result, output string, err error) {
	timeout := seconds(w.spec.TimeoutSeconds)
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	for range maxProbeRetries {
		tctx, cancel := context.WithTimeout(ctx, timeout+timeoutGrace)
		res, output, err = m.runner.Run(tctx, w.spec, pod, &w.container, containerID, podIP)
		expired := tctx.Err() != nil
		cancel()
		// A handler that overran its own timeout is not retried.
		if err == nil || expired {
			break
		}
	}
	return res, output, err
}

// account records a completed probe in the metrics and, for a failure or a
// warning, as an event on the pod, on every attempt like the kubelet (the
// recorder aggregates repeats). Durations are observed for successful probes
// only, as the kubelet does, so that timeouts do not swamp the histogram.
func (m *Manager) account(w *worker, pod *v1.Pod, res probe.Result, output string, took time.Duration) {
	title := w.cfg.probeType.title()
	switch res {
	case probe.Success:
		w.metrics.successful.Inc()
		w.metrics.duration.Observe(took.Seconds())
	case probe.Warning:
		w.metrics.successful.Inc()
		w.metrics.duration.Observe(took.Seconds())
		m.recorder.Event(pod, v1.EventTypeWarning, events.ContainerProbeWarning, fmt.Sprintf("%s probe warning: %s", title, output))
	case probe.Failure:
		w.metrics.failed.Inc()
		m.log.Debug("probe failed", "pod", pod.Namespace+"/"+pod.Name, "container", w.key.container, "probe", w.cfg.probeType, "output", output)
		m.recorder.Event(pod, v1.EventTypeWarning, events.ContainerUnhealthy, fmt.Sprintf("%s probe failed: %s", title, output))
	default:
		// Unknown without an error counts as a failure, without an event.
		w.metrics.failed.Inc()
	}
}
