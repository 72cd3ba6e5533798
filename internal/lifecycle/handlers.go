package lifecycle

import (
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
)

// PressureAdmitter is the eviction manager's admission check: may pod start
// on the node as its pressure is now.
type PressureAdmitter interface {
	Admit(pod *v1.Pod) (ok bool, reason, message string)
}

// EvictionAdmitHandler is the kubelet's eviction admit handler, the first
// of its list: under node pressure, only the pods the pressure spares
// start. It reads the eviction manager's last observation.
func EvictionAdmitHandler(m PressureAdmitter) PodAdmitHandler {
	return HandlerFunc(func(attrs *PodAdmitAttributes) Result {
		if ok, reason, message := m.Admit(attrs.Pod.Pod); !ok {
			return Result{Reason: reason, Message: message}
		}
		return Result{Admit: true}
	})
}

// SysctlAdmitHandler is the kubelet's sysctl admit handler over the node's
// allowlist; nil allows only pods without sysctls.
func SysctlAdmitHandler(allowed *admission.SysctlAllowlist) PodAdmitHandler {
	return HandlerFunc(func(attrs *PodAdmitAttributes) Result {
		if r, bad := allowed.Rejection(attrs.Pod.Pod); bad {
			return r
		}
		return Result{Admit: true}
	})
}

// PodOSAdmitHandler is the first checks of the kubelet's predicate admit
// handler, those "that preemption will not help": the pod's OS and its
// supplementalGroupsPolicy. berth runs them as a handler of their own so
// that the unsupported-features handler can come between them and the
// resource fit: a pod for another OS is refused for its OS whatever else it
// asks for, as by the kubelet.
func PodOSAdmitHandler() PodAdmitHandler {
	return HandlerFunc(func(attrs *PodAdmitAttributes) Result {
		if r, bad := admission.EarlyRejection(attrs.Pod.Pod, attrs.Node); bad {
			return r
		}
		return Result{Admit: true}
	})
}

// PredicateAdmitHandler is the kubelet's predicate admit handler: the
// resource fit against the other pods and the node predicates (node name,
// selector and affinity, host ports, NoExecute taints). Its rejections are
// recoverable: the pipeline's failure handler decides on them.
func PredicateAdmitHandler() PodAdmitHandler {
	return HandlerFunc(func(attrs *PodAdmitAttributes) Result {
		return admission.Predicate(attrs.Pod, admission.Node{Node: attrs.Node, Active: attrs.OtherPods})
	})
}

// criticalPodAdmissionHandler is the kubelet's CriticalPodAdmissionHandler.
type criticalPodAdmissionHandler struct{}

// CriticalPodAdmissionHandler is the kubelet's failure handler of the same
// name: a critical pod that failed only for lack of resources is admitted
// at the cost of victims among the other pods, which the caller kills
// before the pod starts.
func CriticalPodAdmissionHandler() AdmissionFailureHandler { return criticalPodAdmissionHandler{} }

func (criticalPodAdmissionHandler) HandleAdmissionFailure(attrs *PodAdmitAttributes, r Result) (Result, error) {
	return admission.HandleAdmissionFailure(attrs.Pod, attrs.OtherPods, r)
}

// NewPipeline is berth's admission pipeline in its order (doc.go): the
// eviction manager's check (nil: none), the node's sysctl allowlist, the
// pod's OS, berth's unsupported features (and what the node's runtime
// cannot do: user namespaces, image volumes), then the resource fit and
// node predicates with critical-pod preemption.
func NewPipeline(pressure PressureAdmitter, sysctls *admission.SysctlAllowlist, node NodeFeatures) Pipeline {
	var hs []PodAdmitHandler
	if pressure != nil {
		hs = append(hs, EvictionAdmitHandler(pressure))
	}
	hs = append(hs, SysctlAdmitHandler(sysctls), PodOSAdmitHandler(), PodFeaturesAdmitHandler(node), ImageVolumeAdmitHandler(node.Runtime),
		PredicateAdmitHandler())
	return Pipeline{Handlers: hs, Failure: CriticalPodAdmissionHandler()}
}
