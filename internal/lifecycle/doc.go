// Package lifecycle is berth's admission pipeline, in the shape of the
// kubelet's pkg/kubelet/lifecycle: an ordered list of admit handlers, each a
// decision over plain data (the pod, the node, the pods holding resources),
// run by one function, Pipeline.Admit, where the first rejection wins; and
// one failure handler, the critical-pod admission handler, the only place a
// rejection for resources may turn into victims to preempt.
//
// The handlers, in the order berth runs them (NewMainKubelet's order but
// where noted):
//
//	eviction     node pressure            EvictionAdmitHandler over internal/eviction
//	sysctl       the node's allowlist     SysctlAdmitHandler over admission.SysctlAllowlist
//	pod OS       the predicate handler's  PodOSAdmitHandler over admission.EarlyRejection
//	             first checks
//	unsupported  what berth cannot honour PodFeaturesAdmitHandler (here)
//	image volume what the runtime cannot  ImageVolumeAdmitHandler (here)
//	             mount
//	predicate    resource fit and node    PredicateAdmitHandler over admission.Predicate
//	             predicates
//	             + critical-pod preemption CriticalPodAdmissionHandler over
//	                                      admission.HandleAdmissionFailure
//
// Device allocation, the kubelet's allocate-resources handler (second in
// its list), is not one of them: it calls the device plugins and may wait
// for one to register, which must not stall the sync loop, so berth runs it
// at the pod's first sync (internal/podworker/admit.go), after these
// handlers, with the same rejection and the same writer (Rejecter).
//
// The caller (internal/agent/admit.go) owns the pods holding resources,
// carries out the preemptions and writes a rejection through the Rejecter.
package lifecycle
