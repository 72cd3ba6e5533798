// Package admission decides whether a new pod may start on the node, as the
// kubelet's predicate admit handler (pkg/kubelet/lifecycle) and critical-pod
// admission handler (pkg/kubelet/preemption) do: the pod must fit in what
// the node's allocatable leaves after the requests of its active pods, and
// a critical pod that does not fit only for lack of resources may preempt
// lower-QoS pods, chosen by the seed's distance heuristic.
//
// Everything here is a pure function of plain data: the caller owns the
// list of active pods, kills the victims and records the result.
// internal/lifecycle runs Predicate and HandleAdmissionFailure as the
// predicate handler and the critical-pod failure handler of its pipeline.
package admission
