package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// ReasonUnexpectedAdmissionError is the kubelet's rejection reason when a
// critical pod could not be admitted even by preemption.
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// Node is what a new pod is admitted against.
type Node struct {
	// Node gives the name and labels the pod's nodeName and node
	// affinity must match, and the allocatable it must fit in (device
	// plugin resources included).
	Node *v1.Node
	// Active are the pods holding resources: admitted, and not yet
	// terminated.
	Active []*PodInfo
}

// Result is an admission decision and what it rests on.
type Result struct {
	Admit bool `json:"admit"`
	// Reason and Message are the kubelet's, for a pod not admitted; the
	// message is the part after "Pod was rejected: ".
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Insufficient and Failures are every check the pod failed, resource
	// and other.
	Insufficient []InsufficientResource `json:"insufficient,omitempty"`
	Failures     []PredicateFailure     `json:"failures,omitempty"`
	// Preemption is the choice of victims for a critical pod that did not
	// fit only for lack of resources. The pod is admitted once they are
	// killed; if no choice frees enough, it holds what was considered.
	Preemption *Preemption `json:"preemption,omitempty"`
	// NoPreemption says why a pod that did not fit preempts nothing.
	NoPreemption string `json:"noPreemption,omitempty"`
	// Note is what else a reader should know of the decision.
	Note string `json:"note,omitempty"`
}

// Admit decides whether pod may start on node, as the kubelet's predicate
// admit handler does with its critical-pod admission handler for the
// failures: Predicate, then HandleAdmissionFailure.
func Admit(pod *PodInfo, node Node) Result {
	r := Predicate(pod, node)
	if r.Admit || !r.Recoverable() {
		return r
	}
	r, err := HandleAdmissionFailure(pod, node.Active, r)
	if err != nil {
		r.Reason, r.Message = ReasonUnexpectedAdmissionError, UnexpectedAdmissionMessage(err)
	}
	return r
}

// UnexpectedAdmissionMessage is the kubelet's message when recovering from
// an admission failure (preempting) failed with err.
func UnexpectedAdmissionMessage(err error) string {
	return "Unexpected error while attempting to recover from admission failure: " + err.Error()
}

// Recoverable reports a rejection that HandleAdmissionFailure may look at:
// one for the resource fit or the node predicates, not an earlier check.
func (r Result) Recoverable() bool {
	return !r.Admit && (len(r.Insufficient) > 0 || len(r.Failures) > 0)
}

// Predicate is the kubelet's predicate admit handler without its failure
// handler: the checks no preemption can cure (the pod's OS, its
// supplementalGroupsPolicy) first, which end the decision; then the
// resource fit against node.Active and the node predicates, every failure
// recorded, the first resource one as the reason (the kubelet lists the
// resource fit first).
func Predicate(pod *PodInfo, node Node) Result {
	if r, bad := EarlyRejection(pod.Pod, node.Node); bad {
		return r
	}
	var r Result
	r.Insufficient = fit(pod, amounts(node.Node.Status.Allocatable), node.Active)
	r.Failures = predicates(pod.Pod, node.Node, node.Active)
	switch {
	case len(r.Insufficient) == 0 && len(r.Failures) == 0:
		r.Admit = true
	case len(r.Insufficient) > 0:
		r.Reason, r.Message = r.Insufficient[0].Reason(), r.Insufficient[0].Error()
	default:
		r.Reason, r.Message = r.Failures[0].Name, r.Failures[0].Error()
	}
	return r
}

// HandleAdmissionFailure is the kubelet's critical-pod admission handler,
// the one place a rejection for resources turns into victims: a critical
// pod whose every failure in r is a lack of resources is admitted at the
// cost of the victims the returned Preemption names, chosen among active.
// Any other rejection stands, with why it preempts nothing; a critical pod
// is not rejected for resources but for its other failure. The error is
// the kubelet's, for a critical pod no choice of victims makes room for;
// the Preemption then holds what was considered.
func HandleAdmissionFailure(pod *PodInfo, active []*PodInfo, r Result) (Result, error) {
	critical := v1helper.IsCriticalPod(pod.Pod)
	switch {
	case !critical:
		r.NoPreemption = "only a critical pod (static, mirror, or priority ≥ 2000000000) may preempt others"
		return r, nil
	case len(r.Failures) > 0:
		// Preempting would not make the pod fit: only the other reasons
		// count against it.
		r.NoPreemption = "it also failed " + r.Failures[0].Name + ", which preempting pods cannot cure"
		r.Reason, r.Message = r.Failures[0].Name, r.Failures[0].Error()
		return r, nil
	}
	p, err := choosePreemptionVictims(pod, active, requirementsOf(r.Insufficient))
	r.Preemption = p
	if err != nil {
		return r, fmt.Errorf("preemption: error finding a set of pods to preempt: %w", err)
	}
	r.Admit, r.Reason, r.Message = true, "", ""
	return r, nil
}
