package prober

import "k8s.io/apimachinery/pkg/types"

// The results managers: one table of cached results for the three probe
// types, keyed by container ID. Workers write it under Manager.mu; the sync
// loop reads it through the methods below and learns of changes on Updates.

// resultKey identifies a cached result: results follow the container, not
// the container's name.
type resultKey struct {
	probeType   ProbeType
	containerID string
}

type cachedResult struct {
	result Result
	podUID types.UID
}

// Updates delivers every change of a cached result. Changes the reader has
// not taken yet coalesce per container and probe type into the latest.
func (m *Manager) Updates() <-chan Update { return m.updates.out }

// publishLocked caches w's result for its current container.
func (m *Manager) publishLocked(w *worker, r Result) bool {
	w.published = w.state.containerID
	return m.setLocked(resultKey{w.cfg.probeType, w.state.containerID}, w.podUID, r)
}

// setLocked caches a result and reports whether it changed; a change is
// published on Updates and, for readiness and startup, saved.
func (m *Manager) setLocked(k resultKey, uid types.UID, r Result) bool {
	if c, ok := m.results[k]; ok && c.result == r && c.podUID == uid {
		return false
	}
	m.results[k] = cachedResult{r, uid}
	m.updates.push(Update{ContainerID: k.containerID, PodUID: uid, Type: k.probeType, Result: r})
	if k.probeType.persisted() {
		m.changedLocked()
	}
	return true
}

func (m *Manager) dropLocked(k resultKey) {
	if _, ok := m.results[k]; !ok {
		return
	}
	delete(m.results, k)
	if k.probeType.persisted() {
		m.changedLocked()
	}
}

func (m *Manager) changedLocked() {
	m.gen++
	select {
	case m.dirty <- struct{}{}:
	default:
	}
}

// Liveness is the cached liveness result of a container. A container that
// is not running reports Failure, as in the kubelet: act on liveness for
// running containers only.
func (m *Manager) Liveness(containerID string) (Result, bool) {
	return m.get(resultKey{Liveness, bareID(containerID)})
}

// Startup is the cached startup result of a container: Unknown until the
// startup probe decides, Failure when it failed (restart the container).
func (m *Manager) Startup(containerID string) (Result, bool) {
	return m.get(resultKey{Startup, bareID(containerID)})
}

// Ready reports whether the container passed its readiness probe and its
// pod is not terminating. Until the first verdict a container is not ready.
// Only meaningful for containers with a readiness probe: without one, a
// running (and started) container is ready.
func (m *Manager) Ready(containerID string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.results[resultKey{Readiness, bareID(containerID)}]
	if !ok || c.result != Success {
		return false
	}
	e := m.pods[c.podUID]
	return e == nil || !e.terminating
}

// Started reports whether the container's startup probe succeeded. Only
// meaningful for containers with a startup probe: without one, a running
// container is started.
func (m *Manager) Started(containerID string) bool {
	r, ok := m.Startup(containerID)
	return ok && r == Success
}

func (m *Manager) get(k resultKey) (Result, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.results[k]
	return c.result, ok
}
