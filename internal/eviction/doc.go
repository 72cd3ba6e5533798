// Package eviction is the kubelet's node-pressure eviction manager
// (pkg/kubelet/eviction): it watches the node's memory, disk, inodes and
// process IDs, reports MemoryPressure, DiskPressure and PIDPressure, and when
// a threshold is crossed it first reclaims what the node itself holds
// (unused containers and images) and then evicts pods, one per pass.
//
// Every MonitoringInterval a pass:
//
//  1. observes each signal (available and capacity) in a stats summary;
//  2. finds the thresholds met, keeping those already acted on until their
//     minimum reclaim is satisfied too;
//  3. sets a node condition for every threshold met and keeps it until
//     evictionPressureTransitionPeriod has passed since it was last seen;
//  4. evicts every pod past its own local storage limits (an emptyDir's
//     sizeLimit, the pod's or a container's ephemeral-storage limit), if
//     LocalStorageCapacityIsolation, and stops there if it evicted any;
//  5. acts only on thresholds met for their grace period (none for hard
//     thresholds) and observed with fresh stats, memory first;
//  6. runs the signal's node-level reclaim functions, observes again and
//     stops if every threshold is clear, minimum reclaim included;
//  7. otherwise ranks the active pods for the starved resource and evicts
//     the first one that is not critical, then waits for it to stop.
//
// Critical pods are never evicted and always admitted, as in the kubelet:
// static pods (berth's manifests, whose config source is not "api"), mirror
// pods, and pods at system-critical priority. Under pressure berth evicts
// the pods created through its local API.
//
// The decisions (parsing, observations, thresholds met, grace and transition
// periods, conditions, ranking, messages, admission) are pure functions over
// plain data; the Manager does the I/O through narrow interfaces and an
// injected clock.
//
// Not implemented: memcg threshold notifications (the kubelet's
// kernelMemcgNotification; berth polls) and the split image/container filesystem (containerfs signals).
package eviction
