// Package userns gives pods that ask for their own user namespace
// (spec.hostUsers: false) a range of host IDs, as the kubelet's userns
// manager does (pkg/kubelet/userns): each pod gets idsPerPod (65536) IDs
// out of the kubelet's own range, recorded in <root>/pods/<uid>/userns so
// that a restart finds every pod's range again, and released when the pod
// is gone.
//
// The allocator (allocator.go) is a pure state machine over slot indices;
// the manager (manager.go) does the file I/O around it; the kubelet's range
// comes from /etc/subuid and /etc/subgid (subid.go); whether the runtime
// can do user namespaces at all from its CRI status (support.go).
package userns
