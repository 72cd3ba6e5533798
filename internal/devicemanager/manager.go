// Package devicemanager hands devices from device plugins to containers, as
// the kubelet's device manager does: it serves the plugins' Registration
// service on <dir>/kubelet.sock, follows each plugin's device list, chooses
// and allocates devices when a pod is admitted, records every allocation in
// kubelet_internal_checkpoint before the container is created, and merges
// the plugins' answers into the containers' CRI configs.
//
// Unlike the kubelet, it never re-admits a pod that is already running (a
// berth restart keeps pods and devices as they are), a pod whose plugin
// has not registered yet waits for it rather than failing at once, and a
// lost checkpoint is rebuilt from the devices each container records in
// the runtime (AnnotationDevices).
package devicemanager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/devicemanager/checkpoint"
	"github.com/berth-dev/berth/internal/unixsocket"
)

const (
	// KubeletSocket is the Registration socket's name in the plugin
	// directory: every plugin dials this path.
	KubeletSocket = "kubelet.sock"
	// DefaultDir is where plugins expect it.
	DefaultDir = pluginapi.DevicePluginPath
	// endpointGracePeriod is how long the devices of a plugin whose stream
	// broke still count in capacity (as unhealthy) before the resource is
	// forgotten, as in the kubelet.
	endpointGracePeriod = 5 * time.Minute
)

// EventRecorder records what the device manager decided, about a pod or
// about the node.
type EventRecorder interface {
	Event(pod *v1.Pod, eventType, reason, message string)
	NodeEvent(eventType, reason, message string)
}

// Options configure a Manager.
type Options struct {
	// Dir holds kubelet.sock, the plugins' sockets and the checkpoint.
	Dir    string
	Clock  clock.Clock
	Log    *slog.Logger
	Events EventRecorder
	// Active tells whether a pod still holds its devices: it is wanted and
	// not terminal. The devices of other pods are freed.
	Active func(types.UID) bool
	// Runtime lists the containers whose AnnotationDevices recover the
	// allocations when the checkpoint is lost; nil recovers none.
	Runtime ContainerLister
}

// Manager is the device manager. It is safe for concurrent use.
type Manager struct {
	dir    string
	clk    clock.Clock
	log    *slog.Logger
	events EventRecorder
	active func(types.UID) bool
	// runtime is read once, by Start.
	runtime ContainerLister

	// mu guards the state below. It is held only to read or change it:
	// never across a call to a plugin, a file write, or a callback into
	// another package (Active, Events), which may take their own locks.
	mu        sync.Mutex
	resources map[string]*pluginResource
	pods      podDevices
	// reserved are, per resource, the devices that allocations in flight
	// have chosen and are asking their plugin for: no one else gets them.
	reserved map[string]sets.Set[string]
	// inflight counts the allocations in flight per pod UID, and touched
	// is when (in gen) each pod's allocations last changed: a pod found
	// inactive is freed only if neither says it was admitted meanwhile.
	inflight map[string]int
	touched  map[string]uint64
	gen      uint64
	// snapshots numbers the checkpoint snapshots, in the order of the
	// state they were taken from.
	snapshots uint64
	// ctx bounds the endpoints; closed is set once berth stops taking
	// registrations.
	ctx    context.Context
	closed bool
	wg     sync.WaitGroup

	// writeMu orders the checkpoint writes, and guards written and
	// writtenSeq: the checkpoint as last read or written, so that a write
	// of the same content is skipped, and its snapshot's number, so that
	// an older snapshot never overwrites a newer one. It is never held
	// while taking mu.
	writeMu    sync.Mutex
	written    []byte
	writtenSeq uint64
}

// pluginResource is what berth knows of one resource name.
type pluginResource struct {
	// devices is the plugin's last valid device list, by ID.
	devices map[string]*pluginapi.Device
	// ep is the connected plugin; nil while none is.
	ep *endpoint
	// listed is set once ep's plugin sent its first device list. Until
	// then the resource is not ready: its devices are the ones the last
	// plugin listed, or none after a restart of berth, and a pod admitted
	// against them is refused for devices that are about to come.
	listed bool
	// disconnectedAt is when the plugin went away (or, for a resource
	// known only from the checkpoint, when berth started).
	disconnectedAt time.Time
	// invalid says why the plugin's last device list was refused; the
	// resource has no healthy device until a valid one comes.
	invalid string
}

// healthy returns the devices that can be allocated.
func (r *pluginResource) healthy() sets.Set[string] {
	out := sets.New[string]()
	if r.ep == nil || r.invalid != "" {
		return out
	}
	for id, d := range r.devices {
		if d.Health == pluginapi.Healthy {
			out.Insert(id)
		}
	}
	return out
}

// New returns a manager; Start brings it up.
func New(opts Options) *Manager {
	if opts.Dir == "" {
		opts.Dir = DefaultDir
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Active == nil {
		opts.Active = func(types.UID) bool { return true }
	}
	return &Manager{
		dir: opts.Dir, clk: opts.Clock, log: opts.Log, events: opts.Events, active: opts.Active, runtime: opts.Runtime,
		resources: map[string]*pluginResource{},
		pods:      podDevices{},
		reserved:  map[string]sets.Set[string]{},
		inflight:  map[string]int{},
		touched:   map[string]uint64{},
	}
}

// Start restores the checkpoint, removes the sockets of the previous run so
// that plugins notice and register again, and serves the Registration
// service until ctx is done. Wait waits for it to stop.
func (m *Manager) Start(ctx context.Context) error {
	// Only root may register a plugin or reach one: the directory and the
	// registration socket are the owner's alone.
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return fmt.Errorf("device plugin directory: %w", err)
	}
	if err := m.restore(ctx); err != nil {
		return err
	}
	if err := m.removeStaleSockets(); err != nil {
		return err
	}
	sock := filepath.Join(m.dir, KubeletSocket)
	ln, err := unixsocket.Listen(ctx, sock, 0o600)
	if err != nil {
		return fmt.Errorf("device plugin registration: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registration{m: m})
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	m.wg.Go(func() {
		if err := srv.Serve(ln); err != nil {
			m.log.Error("device plugin registration stopped", "err", err)
		}
	})
	m.wg.Go(func() {
		<-ctx.Done()
		srv.Stop()
		m.mu.Lock()
		m.closed = true
		var eps []*endpoint
		for _, r := range m.resources {
			if r.ep != nil {
				eps = append(eps, r.ep)
			}
		}
		m.mu.Unlock()
		for _, ep := range eps {
			ep.stop()
		}
		os.Remove(sock)
	})
	m.log.Info("device plugin registration listening", "socket", sock)
	return nil
}

// Wait returns once the registration service and every endpoint stopped.
func (m *Manager) Wait() { m.wg.Wait() }

// removeStaleSockets removes every socket in the directory: kubelet.sock of
// the previous run, and the plugins' own, whose removal tells the plugins
// to restart and register again. Other files (the checkpoint, quarantined
// checkpoints) stay.
func (m *Manager) removeStaleSockets() error {
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return fmt.Errorf("device plugin directory: %w", err)
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		path := filepath.Join(m.dir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing stale socket: %w", err)
		}
		m.log.Debug("removed a stale socket", "path", path)
	}
	return nil
}

// restore loads the checkpoint and checks it against what the runtime's
// containers record, before any pod is admitted. One that is missing,
// corrupt or not a regular file is not trusted: a bad one is moved aside
// and reported, and the allocations are recovered from the containers. A
// valid one may still be out of date (an older copy put back, a write lost
// in a crash): where a container records other devices, the container's
// record wins, so no device a running container holds is handed out again.
// The kubelet trusts its checkpoint, and starts afresh without one.
func (m *Manager) restore(ctx context.Context) error {
	path := filepath.Join(m.dir, checkpoint.FileName)
	saved, registered, data, err := m.load(path)
	if err != nil {
		return err
	}
	running, err := m.runningAllocations(ctx)
	if err != nil {
		return err
	}
	merged, corrected := reconcile(saved, running)
	m.mu.Lock()
	loadErrs := m.pods.fromCheckpointData(merged)
	now := m.clk.Now()
	for name := range registered {
		// Known, with no device until its plugin registers again.
		m.resources[name] = &pluginResource{devices: map[string]*pluginapi.Device{}, disconnectedAt: now}
	}
	pods := m.pods.pods().Len()
	// Nothing to record yet without a checkpoint or an allocation.
	record := data != nil || len(merged) > 0
	var snap checkpointSnapshot
	if record {
		snap = m.snapshotLocked()
	}
	m.mu.Unlock()
	m.writeMu.Lock()
	m.written = data
	m.writeMu.Unlock()

	for _, err := range loadErrs {
		m.log.Warn("skipping a device allocation", "file", path, "err", err)
	}
	switch {
	case data == nil && len(running) > 0:
		m.log.Info("recovered device allocations from the runtime's containers", "allocations", len(running), "pods", pods)
		m.nodeEvent(v1.EventTypeNormal, ReasonAllocationsRecovered,
			fmt.Sprintf("Recovered %d device allocations of %d pods from the runtime's containers", len(running), pods))
	case data != nil && len(corrected) > 0:
		m.log.Warn("the device checkpoint disagrees with the runtime's containers; theirs is kept",
			"file", path, "corrections", corrected)
		m.nodeEvent(v1.EventTypeWarning, ReasonCheckpointStale,
			fmt.Sprintf("Device checkpoint %s is out of date; %d allocations taken from the runtime's containers: %s",
				path, len(corrected), strings.Join(corrected, "; ")))
	}
	m.log.Info("restored device allocations", "file", path, "pods", pods)
	if !record {
		return nil
	}
	// Written at once when it changed, and in today's format.
	return m.writeCheckpoint(snap)
}

// load reads the checkpoint's allocations and registered resources, and
// its bytes (nil when there was none to trust). A missing one loads
// nothing; a damaged one, or a path that is not a regular file, is moved
// aside and loads nothing.
func (m *Manager) load(path string) (entries []checkpoint.PodDevicesEntry, registered map[string][]string, data []byte, err error) {
	data, err = readCheckpoint(m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, nil
	}
	var wrongType *wrongTypeError
	if err != nil && !errors.As(err, &wrongType) {
		return nil, nil, nil, fmt.Errorf("reading the device checkpoint: %w", err)
	}
	var format checkpoint.Format
	if err == nil {
		entries, registered, format, err = checkpoint.Decode(data)
	}
	if err != nil {
		return nil, nil, nil, m.quarantine(path, err)
	}
	m.log.Info("read the device checkpoint", "file", path, "format", format, "allocations", len(entries))
	return entries, registered, data, nil
}

// wrongTypeError is a checkpoint path that holds no regular file.
type wrongTypeError struct {
	path string
	mode fs.FileMode
}

func (e *wrongTypeError) Error() string {
	return fmt.Sprintf("%s is not a regular file (mode %s)", e.path, e.mode)
}

// readCheckpoint reads the checkpoint, refusing with a *wrongTypeError
// what is not a regular file: reading a directory fails, a FIFO blocks.
func readCheckpoint(dir string) ([]byte, error) {
	path := filepath.Join(dir, checkpoint.FileName)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &wrongTypeError{path: path, mode: fi.Mode()}
	}
	return checkpoint.Read(dir)
}

// quarantine moves a bad checkpoint aside and reports why it was bad.
func (m *Manager) quarantine(path string, cause error) error {
	moved, err := checkpoint.Quarantine(m.dir, m.clk.Now())
	if err != nil {
		return fmt.Errorf("device checkpoint %s is corrupt (%v) and could not be moved aside: %w", path, cause, err)
	}
	what := "allocations from the runtime's containers"
	if m.runtime == nil {
		what = "no recorded device allocations"
	}
	msg := fmt.Sprintf("Device checkpoint %s is corrupt and was moved to %s; starting with %s: %v", path, moved, what, cause)
	m.log.Error("device checkpoint is corrupt; moved aside", "file", path, "movedTo", moved, "err", cause)
	m.nodeEvent(v1.EventTypeWarning, ReasonCheckpointCorrupt, msg)
	return nil
}

// checkpointSnapshot is the checkpoint's content as of one state of the
// manager, numbered in the order of the states.
type checkpointSnapshot struct {
	seq        uint64
	entries    []checkpoint.PodDevicesEntry
	registered map[string][]string
}

// snapshotLocked copies what the checkpoint records now.
func (m *Manager) snapshotLocked() checkpointSnapshot {
	m.snapshots++
	registered := make(map[string][]string, len(m.resources))
	for name, r := range m.resources {
		registered[name] = sets.List(r.healthy())
	}
	return checkpointSnapshot{seq: m.snapshots, entries: m.pods.toCheckpointData(), registered: registered}
}

// touchLocked notes that a pod's allocations changed.
func (m *Manager) touchLocked(uid string) {
	m.gen++
	m.touched[uid] = m.gen
}

// writeCheckpoint writes snap when its content changed, unless a newer
// snapshot is written already: that one holds every change snap does.
// Callers do not hold mu.
func (m *Manager) writeCheckpoint(snap checkpointSnapshot) error {
	data, err := checkpoint.Encode(snap.entries, snap.registered)
	if err != nil {
		return fmt.Errorf("encoding the device checkpoint: %w", err)
	}
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if snap.seq <= m.writtenSeq {
		return nil
	}
	if !bytes.Equal(data, m.written) {
		if err := checkpoint.Write(m.dir, data); err != nil {
			return fmt.Errorf("writing the device checkpoint: %w", err)
		}
		m.written = data
	}
	m.writtenSeq = snap.seq
	return nil
}

// forgetExpiredLocked forgets the resources whose plugin has been gone for
// longer than the grace period.
func (m *Manager) forgetExpiredLocked() {
	now := m.clk.Now()
	for name, r := range m.resources {
		if r.ep == nil && now.Sub(r.disconnectedAt) >= endpointGracePeriod {
			delete(m.resources, name)
			m.log.Info("forgot a resource whose device plugin did not come back", "resource", name,
				"gone", now.Sub(r.disconnectedAt).Round(time.Second).String())
		}
	}
}

// UpdateAllocatedDevices frees the devices of pods that are no longer
// active (terminated, deleted, rejected) and forgets resources whose plugin
// is gone for good. Active is asked with no lock held; a pod whose
// allocations changed meanwhile, or are being made, is left for the next
// call: it is being admitted.
func (m *Manager) UpdateAllocatedDevices() {
	m.mu.Lock()
	m.forgetExpiredLocked()
	uids, asOf := sets.List(m.pods.pods()), m.gen
	m.mu.Unlock()
	var gone []string
	for _, uid := range uids {
		if !m.active(types.UID(uid)) {
			gone = append(gone, uid)
		}
	}
	if len(gone) == 0 {
		return
	}
	m.mu.Lock()
	gone = slices.DeleteFunc(gone, func(uid string) bool { return m.inflight[uid] > 0 || m.touched[uid] > asOf })
	if len(gone) == 0 {
		m.mu.Unlock()
		return
	}
	m.pods.delete(gone...)
	for _, uid := range gone {
		delete(m.touched, uid)
	}
	snap := m.snapshotLocked()
	m.mu.Unlock()
	m.log.Info("freed the devices of pods that are gone", "pods", gone)
	if err := m.writeCheckpoint(snap); err != nil {
		m.log.Error("writing the device checkpoint", "err", err)
	}
}

// Capacity returns, per resource, every device the plugins list
// (capacity) and the healthy ones (allocatable).
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpiredLocked()
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	for name, r := range m.resources {
		capacity[v1.ResourceName(name)] = *resourceQuantity(len(r.devices))
		allocatable[v1.ResourceName(name)] = *resourceQuantity(r.healthy().Len())
	}
	return capacity, allocatable
}

func (m *Manager) nodeEvent(eventType, reason, message string) {
	if m.events != nil {
		m.events.NodeEvent(eventType, reason, message)
	}
}

func (m *Manager) podEvent(pod *v1.Pod, eventType, reason, message string) {
	if m.events != nil {
		m.events.Event(pod, eventType, reason, message)
	}
}

// sortedKeys returns a map's keys in order.
func sortedKeys[K ~string, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }
