package eviction

import (
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/berth-dev/berth/internal/qos"
	"github.com/berth-dev/berth/internal/v1helper"
)

// admit is the kubelet's eviction admit handler over the node's pressure
// conditions: without pressure every pod is admitted, and critical pods
// always are. Under memory pressure alone, only BestEffort pods are refused
// (they would be the first evicted), unless they tolerate the
// memory-pressure taint; any other pressure refuses every pod.
func admit(conditions []v1.NodeConditionType, pod *v1.Pod) (ok bool, reason, message string) {
	if len(conditions) == 0 || v1helper.IsCriticalPod(pod) {
		return true, "", ""
	}
	if len(conditions) == 1 && conditions[0] == v1.NodeMemoryPressure {
		if qos.PodQOSClass(pod) != v1.PodQOSBestEffort {
			return true, "", ""
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		// Toleration matching logs only for the alpha comparison operators,
		// which are off.
		if corev1helpers.TolerationsTolerateTaint(logr.Discard(), pod.Spec.Tolerations, taint, false) {
			return true, "", ""
		}
	}
	return false, Reason, admissionMessage(conditions)
}
