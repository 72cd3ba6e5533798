package eviction

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Admit says whether pod may start on the node as it is now (the kubelet's
// eviction admit handler): reason and message say why not.
func (m *Manager) Admit(pod *v1.Pod) (ok bool, reason, message string) {
	m.mu.Lock()
	pressure := m.status.Pressure
	m.mu.Unlock()
	ok, reason, message = admit(pressure, pod)
	if !ok {
		m.log.Info("Failed to admit pod to node", "pod", podName(pod), "nodeCondition", pressure)
	}
	return ok, reason, message
}

// Conditions returns the node's MemoryPressure, DiskPressure and PIDPressure
// conditions, as the kubelet's node status reports them.
func (m *Manager) Conditions() []v1.NodeCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]v1.NodeCondition, len(m.conditions))
	for i := range m.conditions {
		m.conditions[i].DeepCopyInto(&out[i])
	}
	return out
}

// Status returns what the last pass saw, for `berth describe node`.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status
	s.Pressure = slices.Clone(s.Pressure)
	s.Thresholds = slices.Clone(s.Thresholds)
	s.LastEviction = s.LastEviction.deepCopy()
	return s
}

// IsUnderMemoryPressure reports the MemoryPressure condition.
func (m *Manager) IsUnderMemoryPressure() bool { return m.underPressure(v1.NodeMemoryPressure) }

// IsUnderDiskPressure reports the DiskPressure condition.
func (m *Manager) IsUnderDiskPressure() bool { return m.underPressure(v1.NodeDiskPressure) }

// IsUnderPIDPressure reports the PIDPressure condition.
func (m *Manager) IsUnderPIDPressure() bool { return m.underPressure(v1.NodePIDPressure) }

func (m *Manager) underPressure(c v1.NodeConditionType) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.status.Pressure, c)
}
