package resize

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// CheckpointName is the checkpoint's file in its directory, the kubelet's
// name for the allocated half of it.
const CheckpointName = "allocated_pods_state"

// Actuated is what was applied to one container: its runtime ID and the
// resources it runs with.
type Actuated struct {
	ID        string                  `json:"id"`
	Resources v1.ResourceRequirements `json:"resources"`
}

// checkpoint is the file: the kubelet keeps allocated and actuated in two
// checkpoints; berth writes both in one file, so they never disagree
// after a crash.
type checkpoint struct {
	Allocated map[types.UID]Allocation          `json:"allocated"`
	Actuated  map[types.UID]map[string]Actuated `json:"actuated"`
	// Pending and Progress are the pods' PodResizePending and
	// PodResizeInProgress conditions: kept with the rest, so that a
	// restart still shows a resize that waits or failed.
	Pending  map[types.UID]*v1.PodCondition `json:"pending,omitempty"`
	Progress map[types.UID]*v1.PodCondition `json:"inProgress,omitempty"`
}

// Manager is the one owner of the pods' allocations and actuated
// resources (the kubelet's allocation manager with its actuated state)
// and of their resize conditions. Every change is written to the
// checkpoint before it is used, so a restart of berth neither forgets an
// admitted resize nor applies one twice. Safe for concurrent use.
type Manager struct {
	path string
	clk  clock.PassiveClock

	mu   sync.Mutex
	st   checkpoint
	pods map[types.UID]*v1.Pod // the pods synced, with their allocations
}

// Open reads the checkpoint in dir, creating dir if missing. A checkpoint
// that cannot be read is an error; the Manager returned with it starts
// empty, as the kubelet's does when its checkpoint is corrupt.
func Open(dir string, clk clock.PassiveClock) (*Manager, error) {
	m := &Manager{path: filepath.Join(dir, CheckpointName), clk: clk, pods: map[types.UID]*v1.Pod{}}
	m.st = checkpoint{Allocated: map[types.UID]Allocation{}, Actuated: map[types.UID]map[string]Actuated{},
		Pending: map[types.UID]*v1.PodCondition{}, Progress: map[types.UID]*v1.PodCondition{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, fmt.Errorf("resize checkpoint dir: %w", err)
	}
	data, err := os.ReadFile(m.path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("reading the resize checkpoint: %w", err)
	}
	var st checkpoint
	if err := json.Unmarshal(data, &st); err != nil {
		return m, fmt.Errorf("resize checkpoint %s: %w", m.path, err)
	}
	for k, v := range st.Allocated {
		m.st.Allocated[k] = v
	}
	for k, v := range st.Actuated {
		m.st.Actuated[k] = v
	}
	for k, v := range st.Pending {
		m.st.Pending[k] = v
	}
	for k, v := range st.Progress {
		m.st.Progress[k] = v
	}
	return m, nil
}

func (m *Manager) saveLocked() error {
	data, err := json.Marshal(m.st)
	if err != nil {
		return fmt.Errorf("encoding the resize checkpoint: %w", err)
	}
	if err := atomicfile.Write(m.path, data, 0o600); err != nil {
		return fmt.Errorf("writing the resize checkpoint: %w", err)
	}
	return nil
}

// Allocated is pod with the resources allocated to it (pod itself when it
// has no allocation, or the same as its spec): what it holds of the node,
// as the kubelet's admission counts the other pods.
func (m *Manager) Allocated(pod *v1.Pod) *v1.Pod {
	if m == nil {
		return pod
	}
	m.mu.Lock()
	alloc := m.st.Allocated[pod.UID]
	m.mu.Unlock()
	out, _ := WithAllocation(pod, alloc)
	return out
}

// Outcome is what Sync decided, for the worker's events and logs.
type Outcome struct {
	// Started is set when a resize was admitted in this call.
	Started bool
	// Pending is the verdict of a resize not admitted (now or before).
	Pending *Verdict
}

// Sync is the allocation manager's handlePodResourcesResize for pod, as
// its spec is now: a pod seen for the first time is allocated what it
// asks for; a spec whose resources differ from the allocation is admitted
// against node and the other pods' allocations, or left pending with the
// kubelet's reason. It returns the pod with its allocated resources: the
// pod every sync of the containers must use.
func (m *Manager) Sync(pod *v1.Pod, node Node) (*v1.Pod, Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	alloc, ok := m.st.Allocated[pod.UID]
	if !ok {
		m.st.Allocated[pod.UID] = AllocationOf(pod)
		m.pods[pod.UID] = pod
		return pod, Outcome{}, m.saveLocked()
	}
	allocated, differs := WithAllocation(pod, alloc)
	if !differs {
		m.pods[pod.UID] = pod
		if m.st.Pending[pod.UID] != nil {
			delete(m.st.Pending, pod.UID)
			return pod, Outcome{}, m.saveLocked()
		}
		return pod, Outcome{}, nil
	}
	var others []*v1.Pod
	for uid, p := range m.pods {
		if uid != pod.UID {
			others = append(others, p)
		}
	}
	v := Admit(pod, allocated, others, node)
	if !v.Admit {
		m.pods[pod.UID] = allocated
		prev := m.st.Pending[pod.UID]
		out := Outcome{Pending: &v}
		if prev != nil && prev.Reason == v.Reason && prev.Message == v.Message && prev.ObservedGeneration == pod.Generation {
			return allocated, out, nil
		}
		m.st.Pending[pod.UID] = m.condition(v1.PodResizePending, v.Reason, v.Message, pod.Generation)
		return allocated, out, m.saveLocked()
	}
	m.st.Allocated[pod.UID] = AllocationOf(pod)
	delete(m.st.Pending, pod.UID)
	m.st.Progress[pod.UID] = m.condition(v1.PodResizeInProgress, "", "", pod.Generation)
	m.pods[pod.UID] = pod
	return pod, Outcome{Started: true}, m.saveLocked()
}

func (m *Manager) condition(t v1.PodConditionType, reason, message string, generation int64) *v1.PodCondition {
	now := metav1.NewTime(m.clk.Now()).Rfc3339Copy()
	return &v1.PodCondition{Type: t, Status: v1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastProbeTime: now, LastTransitionTime: now}
}

// Actuated returns what was applied to the pod's containers, by name.
func (m *Manager) Actuated(uid types.UID) map[string]Actuated {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Actuated{}
	for k, v := range m.st.Actuated[uid] {
		out[k] = v
	}
	return out
}

// SetActuated records that container name (runtime ID id) now runs with r.
func (m *Manager) SetActuated(uid types.UID, name, id string, r v1.ResourceRequirements) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st.Actuated[uid] == nil {
		m.st.Actuated[uid] = map[string]Actuated{}
	}
	if cur, ok := m.st.Actuated[uid][name]; ok && cur.ID == id && apiequality.Semantic.DeepEqual(cur.Resources, r) {
		return nil
	}
	m.st.Actuated[uid][name] = Actuated{ID: id, Resources: *r.DeepCopy()}
	return m.saveLocked()
}

// Settle ends the pod's PodResizeInProgress once every running container
// runs with what is allocated to it (the kubelet's isPodResizeInProgress
// turned false), or records the error of an attempt (reason Error).
func (m *Manager) Settle(pod *v1.Pod, done bool, resizeErr error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.st.Progress[pod.UID]
	switch {
	case resizeErr != nil:
		gen := pod.Generation
		if prev != nil {
			gen = prev.ObservedGeneration
		}
		c := m.condition(v1.PodResizeInProgress, ReasonError, resizeErr.Error(), gen)
		if prev != nil && prev.Reason == c.Reason && prev.Message == c.Message {
			return nil
		}
		m.st.Progress[pod.UID] = c
	case done && prev != nil:
		delete(m.st.Progress, pod.UID)
	default:
		return nil
	}
	return m.saveLocked()
}

// RemovePod forgets a pod that is gone.
func (m *Manager) RemovePod(uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
	_, a := m.st.Allocated[uid]
	_, b := m.st.Actuated[uid]
	if !a && !b {
		return nil
	}
	delete(m.st.Allocated, uid)
	delete(m.st.Actuated, uid)
	delete(m.st.Pending, uid)
	delete(m.st.Progress, uid)
	return m.saveLocked()
}

// Decorate adds to a pod's generated status what the resize knows: each
// container's allocatedResources (its allocated requests), the resources
// a running container runs with, and the pod's PodResizePending and
// PodResizeInProgress conditions (the kubelet's generateAPIPodStatus).
func (m *Manager) Decorate(pod *v1.Pod, s *v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	alloc := m.st.Allocated[pod.UID]
	act := m.st.Actuated[pod.UID]
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			if a, ok := alloc[cs.Name]; ok && len(a.Requests) > 0 {
				cs.AllocatedResources = a.Requests.DeepCopy()
			}
			if cs.State.Running == nil {
				continue
			}
			if x, ok := act[cs.Name]; ok && x.ID != "" && strings.HasSuffix(cs.ContainerID, "://"+x.ID) {
				cs.Resources = x.Resources.DeepCopy()
			} else if a, ok := alloc[cs.Name]; ok {
				// Started since the worker last recorded what runs: berth
				// created it from the allocated pod (the kubelet, too, falls
				// back to the allocation where the runtime reports none).
				cs.Resources = a.DeepCopy()
			}
		}
	}
	for _, c := range []*v1.PodCondition{m.st.Pending[pod.UID], m.st.Progress[pod.UID]} {
		if c == nil {
			continue
		}
		s.Conditions = append(s.Conditions, *c.DeepCopy())
	}
}
