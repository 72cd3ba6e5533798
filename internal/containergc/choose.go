package containergc

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodState answers, for a pod UID, what the pod workers know of the pod,
// with the kubelet's podStateProvider names. Choose only asks once every pod
// source is ready: before that, any pod not yet read would look gone.
type PodState interface {
	// ShouldPodContentBeRemoved reports that the pod is gone (deleted or
	// never wanted, and no worker has it): its containers, sandboxes and
	// logs may all go.
	ShouldPodContentBeRemoved(uid types.UID) bool
	// ShouldPodRuntimeBeRemoved reports that the pod is terminal or gone:
	// nothing of it runs again, so its dead containers and sandboxes may go
	// when the node reclaims disk.
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}

// Container is one of berth's containers, as the GC sees it.
type Container struct {
	ID     string
	PodUID types.UID
	// Name is the container's name in the pod spec.
	Name      string
	SandboxID string
	State     runtimeapi.ContainerState
	CreatedAt time.Time
	// GracePeriod is the time, in seconds, a container in an unknown state
	// is given to stop before it is removed: the pod's
	// terminationGracePeriodSeconds as recorded on the container, 0 if none.
	GracePeriod int64
}

// Sandbox is one of berth's pod sandboxes, as the GC sees it.
type Sandbox struct {
	ID        string
	PodUID    types.UID
	State     runtimeapi.PodSandboxState
	CreatedAt time.Time
}

// Input is everything one pass decides on.
type Input struct {
	// Containers are all of berth's containers, running or not.
	Containers []Container
	// Sandboxes are all of berth's sandboxes, ready or not.
	Sandboxes []Sandbox
	// PodLogDirs are the names of the directories in the pod logs
	// directory.
	PodLogDirs []string
	Now        time.Time
	Policy     Policy
	// AllSourcesReady says every pod source has been read at least once,
	// so that a pod berth does not know of is really gone.
	AllSourcesReady bool
	// EvictNonDeletedPods is the eviction manager's reclaim: terminal pods
	// lose their containers and sandboxes as gone ones do.
	EvictNonDeletedPods bool
	// Pods is asked only when AllSourcesReady is set.
	Pods PodState
}

// Plan is what one pass removes, each with why, oldest first.
type Plan struct {
	Containers []ContainerRemoval
	Sandboxes  []SandboxRemoval
	PodLogDirs []PodLogDir
}

// ContainerRemoval is a container to remove and why.
type ContainerRemoval struct {
	Container
	Reason string
}

// SandboxRemoval is a sandbox to remove and why.
type SandboxRemoval struct {
	Sandbox
	Reason string
}

// PodLogDir is a pod's log directory: Name, <namespace>_<name>_<uid>, in the
// pod logs directory.
type PodLogDir struct {
	Name   string
	PodUID types.UID
}

// Why things go, for logs.
const (
	reasonPodRemoved    = "the pod was removed"
	reasonPodTerminated = "the pod has terminated and the node is reclaiming disk"
	reasonOldSandbox    = "the pod has a newer sandbox"
)

// evictUnit is the kubelet's: the dead instances of one container of one
// pod.
type evictUnit struct {
	uid  types.UID
	name string
}

// Choose decides what one pass removes (the kubelet's evictContainers,
// evictSandboxes and evictPodLogsDirectories). Removals are assumed to
// succeed: a sandbox or log directory is chosen when what keeps it is chosen
// too, and the caller must keep it when that removal fails.
func Choose(in Input) Plan {
	podGone := podVerdicts(in)
	var plan Plan
	removed := map[string]bool{}
	remove := func(cs []Container, reason string) {
		for _, c := range cs {
			removed[c.ID] = true
			plan.Containers = append(plan.Containers, ContainerRemoval{Container: c, Reason: reason})
		}
	}

	units := evictableContainers(in.Containers, in.Now, in.Policy.MinAge)
	for key, unit := range units {
		if why := podGone(key.uid); why != "" {
			remove(unit, why)
			delete(units, key)
		}
	}
	if n := in.Policy.MaxPerPodContainer; n >= 0 {
		keepNewest(units, n, remove, func(key evictUnit) string {
			return fmt.Sprintf("at most %d dead instances of container %q are kept per pod (maximum-dead-containers-per-container)", n, key.name)
		})
	}
	if limit := in.Policy.MaxContainers; limit >= 0 && countContainers(units) > limit {
		why := fmt.Sprintf("the node keeps at most %d dead containers (maximum-dead-containers)", limit)
		// An even share first, at least one each.
		keepNewest(units, max(1, limit/len(units)), remove, func(evictUnit) string { return why })
		if left := countContainers(units); left > limit {
			var flat []Container
			for _, unit := range units {
				flat = append(flat, unit...)
			}
			slices.SortFunc(flat, newestFirst)
			remove(flat[limit:], why)
		}
	}

	plan.Sandboxes = chooseSandboxes(in.Sandboxes, in.Containers, removed, podGone)
	plan.PodLogDirs = choosePodLogDirs(in, removed, plan.Sandboxes, podGone)

	slices.SortFunc(plan.Containers, func(a, b ContainerRemoval) int { return newestFirst(b.Container, a.Container) })
	slices.SortFunc(plan.Sandboxes, func(a, b SandboxRemoval) int { return sandboxNewestFirst(b.Sandbox, a.Sandbox) })
	return plan
}

// podVerdicts returns, for a pod UID, why all its dead containers and
// sandboxes go, or "" when the pod keeps its newest ones. Each pod is asked
// about once per pass, so that the whole pass sees one answer, and not at
// all before every source is ready.
func podVerdicts(in Input) func(types.UID) string {
	verdicts := map[types.UID]string{}
	return func(uid types.UID) string {
		if !in.AllSourcesReady {
			return ""
		}
		why, ok := verdicts[uid]
		if !ok {
			switch {
			case in.Pods.ShouldPodContentBeRemoved(uid):
				why = reasonPodRemoved
			case in.EvictNonDeletedPods && in.Pods.ShouldPodRuntimeBeRemoved(uid):
				why = reasonPodTerminated
			}
			verdicts[uid] = why
		}
		return why
	}
}

// evictableContainers groups the containers that are not running and were
// created at least minAge before now by evict unit, newest first. A
// container without a pod UID belongs to no unit and is never removed.
func evictableContainers(cs []Container, now time.Time, minAge time.Duration) map[evictUnit][]Container {
	newestGCTime := now.Add(-minAge)
	units := map[evictUnit][]Container{}
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.PodUID == "" || c.CreatedAt.After(newestGCTime) {
			continue
		}
		key := evictUnit{uid: c.PodUID, name: c.Name}
		units[key] = append(units[key], c)
	}
	for _, unit := range units {
		slices.SortFunc(unit, newestFirst)
	}
	return units
}

// keepNewest removes all but the newest n of every unit.
func keepNewest(units map[evictUnit][]Container, n int, remove func([]Container, string), why func(evictUnit) string) {
	for key, unit := range units {
		if len(unit) > n {
			remove(unit[n:], why(key))
			units[key] = unit[:n]
		}
	}
}

func countContainers(units map[evictUnit][]Container) int {
	n := 0
	for _, unit := range units {
		n += len(unit)
	}
	return n
}

// newestFirst orders containers by creation time, newest first; the ID
// breaks ties so that every pass, and every test, sees the same order.
func newestFirst(a, b Container) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

func sandboxNewestFirst(a, b Sandbox) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// chooseSandboxes picks the sandboxes that are not ready and have no
// container left once removed ones are gone: all of them for a pod that goes
// whole, all but the pod's newest sandbox otherwise. The newest is kept even
// when it is dead, so the pod's last sandbox stays inspectable.
func chooseSandboxes(sandboxes []Sandbox, containers []Container, removed map[string]bool, podGone func(types.UID) string) []SandboxRemoval {
	inUse := map[string]bool{}
	for _, c := range containers {
		if !removed[c.ID] {
			inUse[c.SandboxID] = true
		}
	}
	byPod := map[types.UID][]Sandbox{}
	for _, s := range sandboxes {
		if s.PodUID != "" {
			byPod[s.PodUID] = append(byPod[s.PodUID], s)
		}
	}
	var out []SandboxRemoval
	for uid, sbs := range byPod {
		why := podGone(uid)
		candidates := sbs
		if why == "" {
			slices.SortFunc(sbs, sandboxNewestFirst)
			candidates, why = sbs[1:], reasonOldSandbox
		}
		for _, s := range candidates {
			if s.State != runtimeapi.PodSandboxState_SANDBOX_READY && !inUse[s.ID] {
				out = append(out, SandboxRemoval{Sandbox: s, Reason: why})
			}
		}
	}
	return out
}

// choosePodLogDirs picks the log directories of gone pods that have no
// sandbox and no container left. The kubelet removes them whatever is left;
// berth waits for the runtime to be done with the pod, so that a log still
// being written is never cut from under its container.
func choosePodLogDirs(in Input, removedContainers map[string]bool, removedSandboxes []SandboxRemoval, podGone func(types.UID) string) []PodLogDir {
	if !in.AllSourcesReady {
		return nil
	}
	gone := map[string]bool{}
	for _, s := range removedSandboxes {
		gone[s.ID] = true
	}
	left := map[types.UID]bool{}
	for _, c := range in.Containers {
		if !removedContainers[c.ID] {
			left[c.PodUID] = true
		}
	}
	for _, s := range in.Sandboxes {
		if !gone[s.ID] {
			left[s.PodUID] = true
		}
	}
	var out []PodLogDir
	for _, name := range slices.Sorted(slices.Values(in.PodLogDirs)) {
		uid, ok := podUIDFromLogDir(name)
		// Only a pod whose content should be removed, even when reclaiming.
		if !ok || left[uid] || podGone(uid) != reasonPodRemoved {
			continue
		}
		out = append(out, PodLogDir{Name: name, PodUID: uid})
	}
	return out
}

// podUIDFromLogDir parses <namespace>_<name>_<uid>. Namespaces and pod names
// cannot hold "_", so any other name is not a pod's and is left alone (the
// kubelet takes whatever follows the last "_").
func podUIDFromLogDir(name string) (types.UID, bool) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 || slices.Contains(parts, "") {
		return "", false
	}
	return types.UID(parts[2]), true
}
