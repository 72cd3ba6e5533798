// Package kuberuntime turns a pod spec into CRI v1 requests: the sandbox
// config, and one container config per container, the way the kubelet's
// kuberuntime does. Everything here is a pure function over the pod and plain
// options; the caller gathers the facts that need I/O (the host's resolv.conf,
// volume host paths, the pod's IPs, the image's user) and passes them in.
//
// The names follow the kubelet (generatePodSandboxConfig,
// generateContainerConfig, makeEnvironmentVariables, makeMounts) so that a
// reader who knows the kubelet can check each mapping field by field.
package kuberuntime
