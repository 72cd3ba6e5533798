package runtime

import (
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// exitTTL bounds how long an exit is remembered: the CRI shows it within
// milliseconds to a few seconds, and an exit of something the CRI never
// lists (a sandbox's pause process) must not be kept forever.
const exitTTL = 2 * time.Minute

// Exit is a container exit the runtime announced by event.
type Exit struct {
	Code int32
	At   time.Time
	OOM  bool
}

// exits remembers container exits that the runtime has announced by event
// but its CRI may not show yet. containerd's CRI plugin marks a container
// exited only after it has deleted the task (a runc delete, tens of
// milliseconds); the event comes at once. Showing the exit through
// ListContainers and ContainerStatus lets berth restart the container
// without waiting for the runtime's bookkeeping: the kubelet's evented PLEG
// acts on the event's status the same way.
type exits struct {
	mu sync.Mutex
	m  map[string]exitRecord
}

type exitRecord struct {
	Exit
	exited bool      // false while only an OOM is known
	seen   time.Time // for exitTTL
}

// record notes that container id exited.
func (e *exits) record(id string, x Exit, now time.Time) {
	e.update(id, now, func(r *exitRecord) {
		x.OOM = x.OOM || r.OOM
		r.Exit, r.exited = x, true
	})
}

// recordOOM notes that container id was killed for memory; its exit
// follows.
func (e *exits) recordOOM(id string, now time.Time) {
	e.update(id, now, func(r *exitRecord) { r.OOM = true })
}

func (e *exits) update(id string, now time.Time, f func(*exitRecord)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]exitRecord{}
	}
	for k, r := range e.m {
		if now.Sub(r.seen) > exitTTL {
			delete(e.m, k)
		}
	}
	r := e.m[id]
	f(&r)
	r.seen = now
	e.m[id] = r
}

// pending returns the exit of a container the CRI still reports running,
// and forgets exits the CRI has caught up with.
func (e *exits) pending(id string, state runtimeapi.ContainerState) (Exit, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.m[id]
	if !ok {
		return Exit{}, false
	}
	if state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		delete(e.m, id)
		return Exit{}, false
	}
	return r.Exit, r.exited
}

// overlayList marks the listed containers whose exit is pending as exited,
// and drops them when the filter asks for running containers only.
func (e *exits) overlayList(cs []*runtimeapi.Container, f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	onlyRunning := f.GetState() != nil && f.GetState().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	out := cs[:0]
	for _, c := range cs {
		if _, ok := e.pending(c.Id, c.State); ok {
			if onlyRunning {
				continue
			}
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		}
		out = append(out, c)
	}
	return out
}

// overlayStatus shows a pending exit in st as the CRI will once it
// catches up: exited at the event's time with its code, the reason as
// containerd's CRI words it.
func (e *exits) overlayStatus(st *runtimeapi.ContainerStatus) {
	if st == nil {
		return
	}
	x, ok := e.pending(st.Id, st.State)
	if !ok {
		return
	}
	st.State = runtimeapi.ContainerState_CONTAINER_EXITED
	st.ExitCode = x.Code
	st.FinishedAt = x.At.UnixNano()
	switch {
	case x.OOM:
		st.Reason = "OOMKilled"
	case x.Code == 0:
		st.Reason = "Completed"
	default:
		st.Reason = "Error"
	}
}
