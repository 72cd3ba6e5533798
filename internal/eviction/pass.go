package eviction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// Synchronize runs one pass and returns the pod it evicted, if any; the
// error says why the pass could not observe the node, or why the evicted
// pod failed to stop.
func (m *Manager) Synchronize(ctx context.Context) (*v1.Pod, error) {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	if len(m.thresholds) == 0 && !m.localStorageIsolation {
		m.publish(m.clk.Now(), nil, nil)
		return nil, nil
	}
	if err := m.detectImageFs(ctx); err != nil {
		m.publishError(err)
		return nil, err
	}
	pods := m.activePods()
	summary, err := m.getSummary(ctx)
	if err != nil {
		m.publishError(err)
		return nil, err
	}
	obs, stats := makeObservations(summary)
	now := m.clk.Now()
	s := m.st.advance(m.thresholds, obs, m.transition, now)
	m.st = s.next
	m.publish(now, obs, s.met)

	if m.localStorageIsolation {
		if evicted, err := m.localStorageEviction(ctx, pods, stats); evicted != nil || err != nil {
			return evicted, err
		}
	}
	threshold, starved, ok := reclaimableThreshold(s.act)
	if !ok {
		return nil, nil
	}
	m.log.Info("Eviction manager: attempting to reclaim", "resourceName", starved, "threshold", threshold.String())
	m.events.NodeEvent(v1.EventTypeWarning, ReasonEvictionThresholdMet, fmt.Sprintf("Attempting to reclaim %s", starved))
	if m.reclaimNodeLevelResources(ctx, threshold.Signal, starved) {
		m.log.Info("Eviction manager: able to reduce resource pressure without evicting pods", "resourceName", starved)
		return nil, nil
	}
	return m.evictOne(ctx, pods, stats, obs, threshold, starved, s.act)
}

// evictOne ranks the active pods for the starved resource and evicts the
// first that is not critical: at most one pod per pass, so that the next
// pass sees what it freed.
func (m *Manager) evictOne(ctx context.Context, pods []*v1.Pod, stats statsFunc, obs observations, threshold Threshold, starved v1.ResourceName, act []Threshold) (*v1.Pod, error) {
	rank, ok := m.ranks[threshold.Signal]
	if !ok {
		m.log.Error("Eviction manager: no ranking function for signal", "signal", threshold.Signal)
		return nil, nil
	}
	if len(pods) == 0 {
		m.log.Error("Eviction manager: eviction thresholds have been met, but no pods are active to evict", "resourceName", starved)
		return nil, nil
	}
	pods = slices.Clone(pods)
	rank(pods, stats)
	m.log.Info("Eviction manager: must evict pod(s) to reclaim", "resourceName", starved, "ranked", podNames(pods))
	for _, t := range act {
		if o := obs[t.Signal]; !o.time.IsZero() {
			m.metrics.statsAge.WithLabelValues(string(t.Signal)).Observe(m.clk.Since(o.time).Seconds())
		}
	}
	for _, pod := range pods {
		if v1helper.IsCriticalPod(pod) {
			// Static pods are critical: nothing would start them again.
			m.log.Warn("Eviction manager: cannot evict a critical pod", "pod", podName(pod))
			continue
		}
		message, annotations := evictionMessage(starved, pod, stats, act, obs)
		grace := evictionGracePeriod(threshold, pod, m.maxPodGrace)
		m.metrics.evictions.WithLabelValues(string(threshold.Signal)).Inc()
		return pod, m.evict(ctx, pod, threshold.Signal, starved, grace, message, annotations)
	}
	m.log.Info("Eviction manager: unable to evict any pods from the node", "resourceName", starved)
	return nil, nil
}

// detectImageFs learns once whether images have a filesystem of their own,
// which decides how pods are ranked and what is reclaimed for disk.
func (m *Manager) detectImageFs(ctx context.Context) error {
	if m.ranks != nil {
		return nil
	}
	withImageFs := false
	if m.hasImageFs != nil {
		ctx, cancel := context.WithTimeout(ctx, statsTimeout)
		defer cancel()
		var err error
		if withImageFs, err = m.hasImageFs(ctx); err != nil {
			return fmt.Errorf("eviction manager: failed to tell whether images have a filesystem of their own: %w", err)
		}
	}
	m.log.Info("Eviction manager: filesystem detection", "dedicatedImageFs", withImageFs)
	m.withImageFs = withImageFs
	m.ranks = rankFuncs(withImageFs)
	m.reclaims = reclaimSteps(m.imageGC, m.containerGC, withImageFs)
	return nil
}

func (m *Manager) getSummary(ctx context.Context) (*statsapi.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	s, err := m.summary.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("eviction manager: failed to get summary stats: %w", err)
	}
	if s == nil {
		return nil, errors.New("eviction manager: the stats provider returned no summary")
	}
	return s, nil
}

// reclaimNodeLevelResources runs the signal's reclaim steps and reports
// whether, observed again, every threshold is clear by its minimum reclaim:
// then no pod needs to go.
func (m *Manager) reclaimNodeLevelResources(ctx context.Context, signal Signal, starved v1.ResourceName) bool {
	steps := m.reclaims[signal]
	if len(steps) == 0 {
		return false
	}
	for _, step := range steps {
		sctx, cancel := context.WithTimeout(ctx, reclaimTimeout)
		err := step.run(sctx)
		cancel()
		if err != nil {
			m.log.Warn("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", starved, "step", step.name, "err", err)
		}
	}
	summary, err := m.getSummary(ctx)
	if err != nil {
		m.log.Error("Eviction manager: failed to get summary stats after resource reclaim", "err", err)
		return false
	}
	obs, _ := makeObservations(summary)
	return len(thresholdsMet(m.thresholds, obs, true)) == 0
}

// evict records the eviction, kills the pod and waits for it to stop.
func (m *Manager) evict(ctx context.Context, pod *v1.Pod, signal Signal, starved v1.ResourceName, grace int64, message string, annotations map[string]string) error {
	return m.evictWithStatus(ctx, pod, signal, starved, grace, message, annotations, evictedStatus(pod, message, m.clk.Now()))
}

// evictWithStatus is evict with the status the pod ends with.
func (m *Manager) evictWithStatus(ctx context.Context, pod *v1.Pod, signal Signal, starved v1.ResourceName, grace int64, message string,
	annotations map[string]string, status v1.PodStatus) error {
	m.events.Event(pod, v1.EventTypeWarning, Reason, message)
	m.log.Info("Eviction manager: evicting pod", "pod", podName(pod), "podUID", pod.UID, "gracePeriod", grace, "message", message, "annotations", annotations)
	now := m.clk.Now()
	kctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second+podCleanupTimeout)
	err := m.killPod(kctx, pod, grace, status)
	cancel()
	record := &Eviction{
		Time: now, Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		Signal: signal, Resource: starved, GracePeriodSeconds: grace,
		Message: message, Annotations: annotations,
	}
	if err != nil {
		record.Error = err.Error()
		err = fmt.Errorf("eviction manager: pod %s failed to evict: %w", podName(pod), err)
		m.log.Error("Eviction manager: pod failed to evict", "pod", podName(pod), "err", err)
	} else {
		m.log.Info("Eviction manager: pod is evicted successfully", "pod", podName(pod))
	}
	m.mu.Lock()
	m.status.LastEviction = record
	m.mu.Unlock()
	return err
}

// publish updates the views after a pass observed the node, and records a
// node event for every condition that turned.
func (m *Manager) publish(now time.Time, obs observations, met []Threshold) {
	m.mu.Lock()
	next, turned := updateConditions(m.conditions, m.st.conditions, now)
	m.conditions = next
	m.status.LastSync = now
	m.status.Error = ""
	m.status.Pressure = slices.Clone(m.st.conditions)
	m.status.Thresholds = thresholdStatuses(m.thresholds, obs, met, m.st)
	m.mu.Unlock()
	for _, reason := range turned {
		m.log.Info("Node condition changed", "event", reason)
		m.events.NodeEvent(v1.EventTypeNormal, reason, m.nodeStatusMessage(reason))
	}
}

// publishError records why a pass could not observe the node; the
// conditions stay as the last pass left them.
func (m *Manager) publishError(err error) {
	m.mu.Lock()
	m.status.Error = err.Error()
	m.mu.Unlock()
}
