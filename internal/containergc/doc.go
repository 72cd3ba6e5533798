// Package containergc collects dead containers, dead sandboxes and the log
// directories of removed pods, the way the kubelet's container GC does
// (pkg/kubelet/kuberuntime/kuberuntime_gc.go).
//
// Every pass lists berth's own sandboxes and containers (those labelled
// berth.dev/managed=true; nothing else is ever looked at) and Choose decides,
// over plain data, what goes:
//
//  1. Evictable containers are those not running and created at least
//     MinAge ago, grouped in evict units (pod UID, container name).
//  2. When every pod source is ready, the units of a pod whose content should
//     be removed (the pod is gone) go whole; on the eviction manager's
//     reclaim path (DeleteAllUnusedContainers) so do those of a pod whose
//     runtime should be removed (the pod is terminal).
//  3. Each unit keeps its newest MaxPerPodContainer containers.
//  4. When more than MaxContainers are left, each unit keeps
//     max(1, MaxContainers/units) of its newest, then the oldest left over
//     go until MaxContainers remain.
//  5. A sandbox goes when it is not ready and has no container left; each pod
//     keeps its newest sandbox unless, every pod source being ready, the
//     pod's content (or, when reclaiming, its runtime) should be removed.
//  6. When every pod source is ready, the log directory
//     (<podLogsDir>/<namespace>_<name>_<uid>) of a pod whose content should
//     be removed goes once the pod has no sandbox and no container left.
//
// Nothing is asked of the pods before every source is ready: until then a
// pod not yet read would look gone. (The kubelet gets the same effect from its
// pod workers, which answer "keep" for unknown pods until they have synced.)
//
// The Manager does the I/O: a container's log files go before the container,
// as the kubelet's removeContainerLog does; a container in an unknown state
// is stopped first, since it may still be running; a sandbox is stopped
// before it is removed. A failed removal is reported and never stops the
// pass, but keeps what depends on it (the container's sandbox, the pod's log
// directory) until a later pass.
package containergc
