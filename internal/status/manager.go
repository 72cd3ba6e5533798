package status

import (
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Manager is the single owner of the latest status of every pod: pod
// workers write, the local API and the CLI read. Readers get deep copies,
// so nothing outside ever shares memory with the table.
type Manager struct {
	mu   sync.RWMutex
	pods map[types.UID]*v1.Pod
	// changed holds a signal when a status changed or a pod was forgotten
	// since the reader last looked.
	changed chan struct{}
}

// NewManager returns an empty table.
func NewManager() *Manager {
	return &Manager{pods: map[types.UID]*v1.Pod{}, changed: make(chan struct{}, 1)}
}

// Set records pod (copied) with st as its status. The status fields the
// control plane owns and the node never sets, the claims the resource
// claim controller and the scheduler made for the pod, are kept from pod:
// those who read the table (the pod-resources API, /pods) name the pod's
// claims from them, as the kubelet's pod manager's pods do.
func (m *Manager) Set(pod *v1.Pod, st v1.PodStatus) {
	p := pod.DeepCopy()
	api := p.Status
	p.Status = *st.DeepCopy()
	p.Status.ResourceClaimStatuses = api.ResourceClaimStatuses
	p.Status.ExtendedResourceClaimStatus = api.ExtendedResourceClaimStatus
	p.Status.NodeAllocatableResourceClaimStatuses = api.NodeAllocatableResourceClaimStatuses
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.pods[p.UID]; ok && apiequality.Semantic.DeepEqual(old, p) {
		return
	}
	m.pods[p.UID] = p
	m.signal()
}

// Changed receives a signal after statuses changed: one reader (the API
// server's status sync) re-reads them all, so signals coalesce.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

func (m *Manager) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Get returns the latest status of the pod with the given UID.
func (m *Manager) Get(uid types.UID) (v1.PodStatus, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.pods[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *p.Status.DeepCopy(), true
}

// Delete forgets the pod.
func (m *Manager) Delete(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[uid]; ok {
		delete(m.pods, uid)
		m.signal()
	}
}

// Pods returns every pod with its status, sorted by namespace, name and UID.
func (m *Manager) Pods() []v1.Pod {
	m.mu.RLock()
	out := make([]v1.Pod, 0, len(m.pods))
	for _, p := range m.pods {
		out = append(out, *p.DeepCopy())
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b v1.Pod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(string(a.UID), string(b.UID))
	})
	return out
}
