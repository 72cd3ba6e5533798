// Package container holds berth's runtime-neutral view of pods and containers:
// what the runtime reports about one pod (PodStatus), and the CRI labels and
// annotations through which berth recognises its own sandboxes and containers
// again after a restart. It has no I/O; the kubelet calls the same idea
// kubecontainer.
package container
