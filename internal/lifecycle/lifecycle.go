package lifecycle

import (
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
)

// PodAdmitAttributes is what a handler decides on: the kubelet's, with the
// node the pod is admitted against, and the other pods as admission keeps
// them (their requests worked out once).
type PodAdmitAttributes struct {
	// Pod is the pod to admit.
	Pod *admission.PodInfo
	// Node is the node as admission sees it: its name, labels and taints,
	// and an allocatable with the device plugins' resources.
	Node *v1.Node
	// OtherPods are the pods holding resources: admitted before, and not
	// yet terminated, in the order they were admitted.
	OtherPods []*admission.PodInfo
}

// Result is an admission decision: Admit, and the kubelet's Reason and
// Message when not, with what the decision rests on for describe.
type Result = admission.Result

// PodAdmitHandler is one admission check, the kubelet's interface.
type PodAdmitHandler interface {
	Admit(attrs *PodAdmitAttributes) Result
}

// AdmissionFailureHandler may recover from a rejection for the resource fit
// or the node predicates (Result.Recoverable), as the kubelet's predicate
// handler hands its failures to the critical-pod admission handler. An
// error is a failure to recover; the pod is then rejected with
// UnexpectedAdmissionError.
type AdmissionFailureHandler interface {
	HandleAdmissionFailure(attrs *PodAdmitAttributes, r Result) (Result, error)
}

// HandlerFunc is a PodAdmitHandler of a plain function.
type HandlerFunc func(attrs *PodAdmitAttributes) Result

// Admit calls f.
func (f HandlerFunc) Admit(attrs *PodAdmitAttributes) Result { return f(attrs) }

// Pipeline is the ordered list of admit handlers and the failure handler.
type Pipeline struct {
	Handlers []PodAdmitHandler
	// Failure, when set, sees every recoverable rejection; nil lets each
	// stand.
	Failure AdmissionFailureHandler
}

// Admit runs the handlers in order, as the kubelet's canAdmitPod does: the
// first rejection is the decision, and the handlers after it do not run. A
// recoverable rejection goes to the failure handler first: if it admits the
// pod (with victims to preempt), the handlers after go on. An admitted
// pod's result is the one that explains it (a preemption), or a plain
// admission.
func (p Pipeline) Admit(attrs *PodAdmitAttributes) Result {
	out := Result{Admit: true}
	for _, h := range p.Handlers {
		r := h.Admit(attrs)
		if !r.Admit && r.Recoverable() && p.Failure != nil {
			var err error
			if r, err = p.Failure.HandleAdmissionFailure(attrs, r); err != nil {
				r.Admit = false
				r.Reason, r.Message = admission.ReasonUnexpectedAdmissionError, admission.UnexpectedAdmissionMessage(err)
			}
		}
		if !r.Admit {
			return r
		}
		if r.Preemption != nil || r.Note != "" {
			out = r
		}
	}
	return out
}
