package userns

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// Manager owns the node's user namespace ranges: the allocator, and each
// pod's mappings file under <podsDir>/<uid>. Safe for concurrent use: pod
// workers ask for their pod's range, the sync loop releases those of pods
// that are gone.
type Manager struct {
	podsDir string
	log     *slog.Logger
	// support is why the runtime cannot do user namespaces, "" when it can.
	support string

	mu    sync.Mutex
	alloc *Allocator
}

// Open builds the manager over alloc and records the range of every pod
// whose directory under podsDir holds a mappings file, as the kubelet does
// at start-up, so that a restart neither forgets a range nor hands it out
// twice. unsupported is why the runtime cannot do user namespaces ("" when
// it can). A file that cannot be read or does not fit is returned as a
// problem and its range left unrecorded: that pod's next sandbox or
// container fails on it (GetOrCreate reads it again), and no other pod is
// harmed; the kubelet refuses to start instead.
func Open(podsDir string, alloc *Allocator, unsupported string, log *slog.Logger) (*Manager, []error) {
	m := &Manager{podsDir: podsDir, alloc: alloc, support: unsupported, log: log}
	entries, err := os.ReadDir(podsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return m, []error{fmt.Errorf("listing %s: %w", podsDir, err)}
	}
	var problems []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		mp, found, err := m.read(uid)
		if err == nil && found {
			err = alloc.Record(uid, mp)
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", m.file(uid), err))
		}
	}
	return m, problems
}

// Unsupported is why the runtime cannot give pods a user namespace, ""
// when it can.
func (m *Manager) Unsupported() string { return m.support }

// PodUserNamespace is the kubelet's GetOrCreateUserNamespaceMappings: the
// node's namespace for a pod of the host's users, else the pod's range,
// read from its mappings file or allocated and written there first.
func (m *Manager) PodUserNamespace(pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if m.support != "" {
		return nil, errors.New(UnsupportedMessage(m.support))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mp, found, err := m.read(pod.UID)
	if err != nil {
		return nil, fmt.Errorf("user namespace: %s: %w", m.file(pod.UID), err)
	}
	if found {
		if err := m.alloc.Record(pod.UID, mp); err != nil {
			return nil, fmt.Errorf("user namespace: %s: %w", m.file(pod.UID), err)
		}
	} else if mp, err = m.create(pod.UID); err != nil {
		return nil, fmt.Errorf("create user namespace: %w", err)
	}
	ids := []*runtimeapi.IDMapping{{HostId: mp.HostID, ContainerId: 0, Length: mp.Length}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids,
		Gids: []*runtimeapi.IDMapping{{HostId: mp.HostID, ContainerId: 0, Length: mp.Length}}}, nil
}

// create allocates a range for pod and writes its mappings file; the range
// is released again if the file cannot be written.
func (m *Manager) create(pod types.UID) (Mapping, error) {
	mp, err := m.alloc.Allocate(pod)
	if err != nil {
		return Mapping{}, err
	}
	if err := os.MkdirAll(filepath.Dir(m.file(pod)), 0o750); err != nil {
		m.alloc.Release(pod)
		return Mapping{}, err
	}
	if err := atomicfile.Write(m.file(pod), encode(mp), 0o600); err != nil {
		m.alloc.Release(pod)
		return Mapping{}, err
	}
	m.log.Info("allocated a user namespace", "podUID", pod, "hostID", mp.HostID, "length", mp.Length)
	return mp, nil
}

// Release frees pod's range and removes its mappings file, once the pod is
// gone (the kubelet's Release at SyncTerminatedPod).
func (m *Manager) Release(pod types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release(pod)
}

func (m *Manager) release(pod types.UID) {
	if err := os.Remove(m.file(pod)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("removing a user namespace mappings file", "podUID", pod, "err", err)
	}
	if m.alloc.Release(pod) {
		m.log.Info("released a user namespace", "podUID", pod)
	}
}

// Housekeep releases the range of every pod that keep says is gone, the
// kubelet's CleanupOrphanedPodUsernsAllocations: a pod whose directory went
// without its release (berth stopped while it stopped).
func (m *Manager) Housekeep(keep func(types.UID) bool) []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.UID
	for _, pod := range m.alloc.Pods() {
		if !keep(pod) {
			m.release(pod)
			out = append(out, pod)
		}
	}
	return out
}

// Mapping returns pod's range, if it holds one.
func (m *Manager) Mapping(pod types.UID) (Mapping, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.alloc.Get(pod)
}

func (m *Manager) file(pod types.UID) string {
	return filepath.Join(m.podsDir, string(pod), MappingsFile)
}

// read returns the pod's recorded range; found is false with no file.
func (m *Manager) read(pod types.UID) (mp Mapping, found bool, err error) {
	data, err := os.ReadFile(m.file(pod))
	if errors.Is(err, fs.ErrNotExist) {
		return Mapping{}, false, nil
	}
	if err != nil {
		return Mapping{}, false, err
	}
	if len(data) == 0 { // the kubelet reads an empty file as none
		return Mapping{}, false, nil
	}
	mp, err = decode(data)
	return mp, err == nil, err
}
