package v1helper

import (
	v1 "k8s.io/api/core/v1"
)

// The kubelet's annotations for where a pod came from (k8s.io/kubernetes
// pkg/kubelet/types). A pod whose source is anything but the API server is a
// static pod.
const (
	ConfigSourceAnnotationKey = "kubernetes.io/config.source"
	ConfigMirrorAnnotationKey = v1.MirrorPodAnnotationKey
	ConfigHashAnnotationKey   = "kubernetes.io/config.hash"
)

// Values of ConfigSourceAnnotationKey. berth's manifest directory is
// FileSource; pods created through its local API are ApiserverSource, so
// that they are ordinary (evictable, preemptable) pods as the API server's
// are to the kubelet.
const (
	FileSource      = "file"
	HTTPSource      = "http"
	ApiserverSource = "api"
)

// SystemCriticalPriority is the lowest priority of a critical pod
// (scheduling.SystemCriticalPriority): system-cluster-critical has it,
// system-node-critical 1000 more.
const SystemCriticalPriority int32 = 2_000_000_000

// IsStaticPod reports a pod that did not come from the API server: it has a
// config source, and the source is not "api".
func IsStaticPod(pod *v1.Pod) bool {
	source, ok := pod.Annotations[ConfigSourceAnnotationKey]
	return ok && source != ApiserverSource
}

// IsMirrorPod reports the API server's copy of a static pod.
func IsMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[ConfigMirrorAnnotationKey]
	return ok
}

// IsCriticalPod reports a pod the node must keep running: static and mirror
// pods (nothing would bring them back), and pods at or above
// SystemCriticalPriority. Critical pods are admitted under node pressure,
// never evicted, and may preempt others.
func IsCriticalPod(pod *v1.Pod) bool {
	if IsStaticPod(pod) || IsMirrorPod(pod) {
		return true
	}
	return pod.Spec.Priority != nil && IsCriticalPodBasedOnPriority(*pod.Spec.Priority)
}

// IsCriticalPodBasedOnPriority reports a priority at or above
// SystemCriticalPriority.
func IsCriticalPodBasedOnPriority(priority int32) bool {
	return priority >= SystemCriticalPriority
}

// Preemptable reports whether preemptor may preempt preemptee: a critical
// pod may preempt any pod that is not, and otherwise a higher priority is
// needed (both must have one).
func Preemptable(preemptor, preemptee *v1.Pod) bool {
	if preemptor == nil || preemptee == nil {
		return false
	}
	if IsCriticalPod(preemptor) && !IsCriticalPod(preemptee) {
		return true
	}
	if preemptor.Spec.Priority != nil && preemptee.Spec.Priority != nil {
		return *preemptor.Spec.Priority > *preemptee.Spec.Priority
	}
	return false
}
